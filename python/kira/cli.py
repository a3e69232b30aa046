"""The `kira` command. Subcommands land with the pipeline."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    print("kira: the command-line interface lands with the pipeline", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
