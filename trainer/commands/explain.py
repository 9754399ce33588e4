"""`trainer explain`: the exercise's worked derivation, after a pass or on request.

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
from trainer.explain import (
    DECLINED,
    EARLY_QUESTION,
    NotPassedYet,
    explanation,
    record_early_look,
)

app = typer.Typer(add_completion=False)


@app.command(rich_help_panel=LEARN_PANEL)
def explain(
    ctx: typer.Context,
    exercise_id: ExerciseArgument = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Show it even though you have not passed yet (every hint counts as seen).",
        ),
    ] = False,
    workspace: WorkspaceOption = None,
    exercises_dir: ExercisesDirOption = None,
) -> None:
    """Show how the gradient is derived, in math, without code; after a pass, or with --force.

    Example: trainer explain softmax
    """
    session = open_session(ctx, workspace, exercises_dir)
    exercise = session.exercise(exercise_id)
    try:
        shown = explanation(exercise, session.store, force=force)
    except NotPassedYet:
        if not console.is_interactive():
            raise
        if not console.ask_yes_no(EARLY_QUESTION.format(id=exercise.id), default=False):
            console.plain(DECLINED.format(id=exercise.id, command="trainer"))
            return
        shown = explanation(exercise, session.store, force=True)
    if not shown.passed:
        record_early_look(session.writable_store(), exercise)
        show_notices(session)
    console.derivation(shown)
