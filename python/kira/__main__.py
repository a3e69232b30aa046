import sys

from kira.cli import main

sys.exit(main())
