"""What every command shares: the two common options, opening the core session a
command works in (:mod:`trainer.session`) and saying what it noticed, and completion
of exercise ids.

The command modules of this package import it; it imports none of them, nor
:mod:`trainer.cli`, so the CLI has no import cycle.

No `from __future__ import annotations` in the CLI modules: typer would then
evaluate every annotation string of every command at each start.
"""

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import typer

from trainer import console
from trainer.catalog import EXERCISES_ENV, Catalog
from trainer.errors import TrainerError
from trainer.session import Session
from trainer.settings import load_settings
from trainer.spec import Exercise
from trainer.workspace import DEFAULT_WORKSPACE, WORKSPACE_ENV, resolve_workspace

# The panels of `trainer --help`.
LEARN_PANEL = "Learn"
AUTHOR_PANEL = "Author and teach"

# No square brackets in help texts: rich markup would swallow them.
WORKSPACE_HELP = (
    f"Folder for scratch files and progress (env: {WORKSPACE_ENV}; default: the nearest "
    f"{DEFAULT_WORKSPACE} in this folder or above, else ./{DEFAULT_WORKSPACE})."
)
EXERCISES_DIR_HELP = (
    f"Another folder of exercises, remembered by the workspace; repeatable (env: "
    f"{EXERCISES_ENV}, path-separated)."
)


@dataclass
class SharedOptions:
    """``--workspace`` and ``--exercises-dir`` given before the command name
    (``trainer -w DIR check``); the root callback keeps them in ``ctx.obj``."""

    workspace: Path | None = None
    exercises_dirs: list[Path] = field(default_factory=list)


def complete_exercise(incomplete: str) -> list[str]:
    """Shell completion for exercise ids (no torch, just file names)."""
    try:
        remembered = load_settings(resolve_workspace()).exercise_dirs
        return [i for i in Catalog.default(remembered).ids() if i.startswith(incomplete)]
    except TrainerError:
        return []


WorkspaceOption = Annotated[
    Path | None,
    typer.Option("--workspace", "-w", help=WORKSPACE_HELP, show_default=False),
]
ExercisesDirOption = Annotated[
    list[Path] | None,
    typer.Option("--exercises-dir", help=EXERCISES_DIR_HELP, show_default=False),
]
ExerciseArgument = Annotated[
    str | None,
    typer.Argument(
        metavar="EXERCISE",
        help="Exercise id (see `trainer list`); defaults to the current one.",
        show_default=False,
        autocompletion=complete_exercise,
    ),
]


def open_session(
    ctx: typer.Context,
    workspace: Path | None = None,
    exercises_dirs: list[Path] | None = None,
) -> Session:
    """The core session a command works in (:class:`trainer.session.Session`), with the
    options given before the command name too; says what opening it noticed (a damaged
    progress file, an interview whose time ran out)."""
    shared = ctx.find_object(SharedOptions) or SharedOptions()
    session = Session(
        workspace or shared.workspace, [*shared.exercises_dirs, *(exercises_dirs or [])]
    )
    show_notices(session)
    if session.interview_ended is not None:
        console.interview_summary(session.interview_ended)
    return session


def show_notices(session: Session) -> None:
    for message in session.take_notices():
        console.notice(message)


def start_exercise(
    session: Session, exercise: Exercise, force: bool = False, watching: bool = False
) -> None:
    """`trainer start`'s work: write the scratch file, make it current, show the statement."""
    result = session.start(exercise, force=force)
    show_notices(session)
    console.started(exercise, result, watching=watching)
