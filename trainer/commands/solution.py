"""`trainer solution`: the reference solution, after a pass or on request.

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
)
from trainer.errors import TrainerError

app = typer.Typer(add_completion=False)


@app.command(rich_help_panel=LEARN_PANEL)
def solution(
    ctx: typer.Context,
    exercise_id: ExerciseArgument = None,
    force: Annotated[
        bool, typer.Option("--force", help="Show it even though you have not passed yet.")
    ] = False,
    workspace: WorkspaceOption = None,
    exercises_dir: ExercisesDirOption = None,
) -> None:
    """Show the reference solution, with what to notice; after a pass, or with --force.

    Example: trainer solution sigmoid
    """
    session = open_session(ctx, workspace, exercises_dir)
    exercise = session.exercise(exercise_id)
    path = session.catalog.solution_path(exercise)
    if not path.is_file():
        raise TrainerError(f"no reference solution is bundled for `{exercise.id}` ({path}).")
    passed = session.exists and session.store.load().progress(exercise.id).passed
    if not passed and not force:
        if not console.is_interactive():
            raise TrainerError(
                f"you have not passed `{exercise.id}` yet. Keep trying (`trainer hint` helps), "
                f"or see it anyway with `trainer solution {exercise.id} --force`."
            )
        if not console.ask_yes_no(
            f"You have not passed `{exercise.id}` yet. See the solution anyway?", default=False
        ):
            console.out.print("Good call. `trainer hint` reveals one more hint.")
            return
    if not passed:
        with session.writable_store().update() as state:
            state.progress(exercise.id).solution_seen = True
    console.solution(exercise, path.read_text(encoding="utf-8"), passed)
