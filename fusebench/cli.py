"""The `fusebench` command line: one subcommand per module in `fusebench.commands`.

Each command module exports `add_parser(subparsers)` and `run(args) -> int` (the exit status).
Errors the user can fix (`FusebenchError`, and argparse's own: a missing value, a value of the
wrong type, an unknown flag) are printed as one line and exit with status 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import NoReturn

from fusebench.errors import FusebenchError

COMMANDS = ("list", "run", "compare", "bisect", "report")
# NOTE: what an interruption leaves behind, for commands that do not say it themselves (an
# exception with a `kept` attribute, such as compare's): run merges each measurement as it ends.
KEPT_WHEN_INTERRUPTED = {"run": "results written so far are kept"}


class OneLineErrorParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one `prog: error: ...` line (no usage block); its
    subcommands' parsers are of this class too."""

    def error(self, message: str) -> NoReturn:
        """Prints the error and a pointer to --help as one line; exits with status 2."""
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every subcommand registered."""
    parser = OneLineErrorParser(
        prog="fusebench",
        description="Benchmark the fusebench compiler and its peers on curated suites.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"fusebench.commands.{name}").add_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line `argv` (default: sys.argv[1:]) and returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args.handler(args))
    except FusebenchError as error:
        print(f"fusebench {args.command}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as interruption:
        kept = getattr(interruption, "kept", None) or KEPT_WHEN_INTERRUPTED.get(args.command, "nothing was written")
        print(f"fusebench {args.command}: interrupted ({kept})", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
