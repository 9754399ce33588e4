"""`trainer interview`: one exercise against the clock.

No `from __future__ import annotations`: typer reads the annotations at run time.
"""

from typing import Annotated

import typer

from trainer import console
from trainer.commands.common import (
    LEARN_PANEL,
    ExercisesDirOption,
    WorkspaceOption,
    complete_exercise,
    open_session,
    show_notices,
)
from trainer.errors import TrainerError
from trainer.interview import DEFAULT_MINUTES

app = typer.Typer(add_completion=False)


@app.command(rich_help_panel=LEARN_PANEL)
def interview(
    ctx: typer.Context,
    exercise_id: Annotated[
        str | None,
        typer.Argument(
            metavar="EXERCISE",
            help="Exercise id; a random one you have not passed when left out.",
            show_default=False,
            autocompletion=complete_exercise,
        ),
    ] = None,
    minutes: Annotated[float, typer.Option(min=1.0, help="Time allowed.")] = DEFAULT_MINUTES,
    stop: Annotated[bool, typer.Option("--stop", help="End the interview under way.")] = False,
    workspace: WorkspaceOption = None,
    exercises_dir: ExercisesDirOption = None,
) -> None:
    """A timed interview: one exercise against the clock, with checks and hints counted.

    Example: trainer interview --minutes 30
    """
    import random

    from trainer import interview as interviews

    session = open_session(ctx, workspace, exercises_dir)
    store = session.writable_store()
    if stop:
        summary = interviews.stop(store)
        if summary is None:
            raise TrainerError("no interview is under way. Start one with `trainer interview`.")
        console.interview_summary(summary)
        return
    if exercise_id is not None:
        exercise = session.catalog.get(exercise_id)
    else:
        exercise = interviews.pick_exercise(session.catalog.all, store.load(), random.Random())
    started = interviews.begin(store, exercise, minutes)
    # A fresh stub in a file of its own (interview/EX.py): the scratch file, solved or
    # not, is left alone; check, watch, open and plot use this file until the end.
    result = session.workspace.start_interview(exercise)
    show_notices(session)
    console.started(exercise, result)
    console.interview_started(exercise, started.minutes)
