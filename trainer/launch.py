"""The console script: for a command that checks code, the checking server starts
first, so that it imports torch while the CLI starts (typer, the spec, the workspace).

Nothing else is imported before that: the CLI's own start is what this overlaps.
"""

import sys

# The commands that check code on a server of their own, named first on the command line.
_CHECKING = frozenset({"check", "watch", "validate", "grade", "interview", "plot"})


def starts_a_server(args: list[str]) -> bool:
    """Whether ``trainer ARGS`` checks code (not a request for help)."""
    return bool(args) and args[0] in _CHECKING and not {"--help", "-h"} & set(args)


def main() -> None:
    if starts_a_server(sys.argv[1:]):
        from trainer.checking.spawn import start_early

        start_early()
    from trainer.cli import main as cli_main

    cli_main()
