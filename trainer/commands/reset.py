"""`trainer reset`: the stub back in one scratch file, or in all of them.

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
from trainer.workspace import reset_all, reset_scratch

app = typer.Typer(add_completion=False)


@app.command(rich_help_panel=LEARN_PANEL)
def reset(
    ctx: typer.Context,
    exercise_id: ExerciseArgument = None,
    every: Annotated[
        bool,
        typer.Option("--all", help="Every scratch file of the workspace, after one confirmation."),
    ] = False,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="With --all: do not ask (for scripts).")
    ] = False,
    workspace: WorkspaceOption = None,
    exercises_dir: ExercisesDirOption = None,
) -> None:
    """Put the stub back in the scratch file; your current file is backed up first.

    Example: trainer reset linear
    """
    session = open_session(ctx, workspace, exercises_dir)
    if not every:
        exercise = session.exercise(exercise_id)
        path, backup = reset_scratch(session.workspace, exercise)
        console.reset_done(exercise, path, backup)
        return
    if exercise_id is not None:
        raise typer.BadParameter("give an exercise or --all, not both.", param_hint="'--all'")
    files = session.workspace.scratch_files(session.catalog.all) if session.exists else []
    if not files:
        console.out.print(f"No scratch files in {session.workspace.root}: nothing to reset.")
        return
    question = (
        f"Reset {console.plural(len(files), 'scratch file')} in {session.workspace.root} to "
        "their stubs? Each edited file is backed up first."
    )
    if not yes:
        if not console.is_interactive():
            raise TrainerError(
                f"`trainer reset --all` would reset {console.plural(len(files), 'file')}; "
                "it asks first, and there is no terminal to ask. Add --yes to go ahead."
            )
        if not console.ask_yes_no(question, default=False):
            console.out.print("Nothing was reset.")
            return
    for exercise, path, backup in reset_all(session.workspace, session.catalog.all):
        console.reset_done(exercise, path, backup)
