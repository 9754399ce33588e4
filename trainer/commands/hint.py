"""`trainer hint`: the next hint, or all of them.

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
def hint(
    ctx: typer.Context,
    exercise_id: ExerciseArgument = None,
    show_all: Annotated[bool, typer.Option("--all", help="Show every hint at once.")] = False,
    workspace: WorkspaceOption = None,
    exercises_dir: ExercisesDirOption = None,
) -> None:
    """Reveal the next hint for an exercise (each call shows one more).

    Example: trainer hint linear
    """
    from trainer.hints import reveal_all_hints, reveal_next_hint

    session = open_session(ctx, workspace, exercises_dir)
    exercise = session.exercise(exercise_id)
    store = session.writable_store()
    if show_all:
        reveal_all_hints(exercise, store)
        show_notices(session)
        console.all_hints(exercise)
        return
    reveal = reveal_next_hint(exercise, store)
    show_notices(session)
    console.hint(exercise, reveal.number, reveal.text, reveal.last)
