import sys

from kira.eval.cli import main

sys.exit(main())
