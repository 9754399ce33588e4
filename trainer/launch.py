"""The console script: for a command that checks code, the checking server starts
first, so that it imports torch while the CLI starts (typer, the spec, the workspace).

Nothing else is imported before that: the CLI's own start is what this overlaps.
While the server is not ready yet, the CLI prepares to draw the verdict (rich's
console and tables): on the way to a check's report, not after it.
"""

import atexit
import contextlib
import os
import sys
from typing import NoReturn

# The commands that check code on a server of their own, named first on the command line.
_CHECKING = frozenset({"check", "watch", "validate", "grade", "interview", "plot"})


def starts_a_server(args: list[str]) -> bool:
    """Whether ``trainer ARGS`` checks code (not a request for help)."""
    return bool(args) and args[0] in _CHECKING and not {"--help", "-h"} & set(args)


def _prepare_to_draw() -> None:
    from trainer.console import prepare_to_draw

    prepare_to_draw()


def main() -> None:
    if starts_a_server(sys.argv[1:]):
        from trainer.checking.spawn import start_early

        start_early(meanwhile=_prepare_to_draw)
    from trainer.cli import main as cli_main

    cli_main()


def run() -> NoReturn:
    """The console script's entry point: :func:`main`, then the process ends at once."""
    try:
        main()
        code = 0
    except SystemExit as stop:
        code = _exit_code(stop.code)
    _leave(code)


def _exit_code(code: object) -> int:
    """As Python turns ``sys.exit(code)`` into a process's exit code."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _leave(code: int) -> NoReturn:
    """End the process without tearing the interpreter down (~10 ms of freeing what
    typer, rich and yaml made, on the way out of every command). What that teardown
    does that matters is done first: atexit's work (a checking server waited for,
    logging flushed) and the standard streams flushed."""
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # closed, or its reader gone
            stream.flush()
    os._exit(code)
