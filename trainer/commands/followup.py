"""`trainer followup`: the interviewer's next question after a pass, taken up.

No `from __future__ import annotations`: typer reads the annotations at run time.
"""

from typing import Annotated

import typer

from trainer import console
from trainer.commands.common import (
    LEARN_PANEL,
    ExerciseArgument,
    ExercisesDirOption,
    WorkspaceOption,
    open_session,
    show_notices,
)

app = typer.Typer(add_completion=False)


@app.command(rich_help_panel=LEARN_PANEL)
def followup(
    ctx: typer.Context,
    exercise_id: ExerciseArgument = None,
    show_list: Annotated[
        bool, typer.Option("--list", help="List every follow-up, without taking one up.")
    ] = False,
    workspace: WorkspaceOption = None,
    exercises_dir: ExercisesDirOption = None,
) -> None:
    """Ask the interviewer's next follow-up question (after a pass) and take it up:
    from then on `trainer check` grades it too, as a stage of its own.

    Example: trainer followup softmax
    """
    from trainer.follow_ups import ask_next, status

    session = open_session(ctx, workspace, exercises_dir)
    exercise = session.exercise(exercise_id)
    store = session.writable_store()
    if show_list:
        where = status(exercise, store.load().progress(exercise.id))
        show_notices(session)
        active = where.active.id if where.active is not None else None
        console.follow_up_list(exercise, where.passed, active)
        return
    asked = ask_next(store, exercise)
    show_notices(session)
    if asked.follow_up is None:
        console.no_follow_up(exercise, asked.passed)
        return
    console.follow_up_question(exercise, asked.follow_up, asked.number)
