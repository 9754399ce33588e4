"""`trainer new`: scaffold a spec, a solution and a wrong variant.

No `from __future__ import annotations`: typer reads the annotations at run time.
"""

from pathlib import Path
from typing import Annotated

import typer

from trainer import console
from trainer.commands.common import (
    AUTHOR_PANEL,
    ExercisesDirOption,
    WorkspaceOption,
    open_session,
)
from trainer.errors import TrainerError

app = typer.Typer(add_completion=False)


@app.command(rich_help_panel=AUTHOR_PANEL)
def new(
    ctx: typer.Context,
    exercise_id: Annotated[
        str, typer.Argument(metavar="ID", help="The new exercise's id, e.g. my_softmax.")
    ],
    root: Annotated[
        Path, typer.Option(help="Folder that gets exercises/ and solutions/ (created if needed).")
    ] = Path("."),
    workspace: WorkspaceOption = None,
    exercises_dir: ExercisesDirOption = None,
) -> None:
    """Scaffold a spec, a reference solution and a wrong variant, every field explained.

    Example: trainer new my_softmax --root my-exercises
    """
    from trainer.authoring import scaffold

    session = open_session(ctx, workspace, exercises_dir)
    if exercise_id in session.catalog.ids():
        raise TrainerError(
            f"an exercise called `{exercise_id}` exists already in {session.catalog.where()}. "
            "Choose another id."
        )
    files = scaffold(root, exercise_id)
    console.scaffolded(exercise_id, files, root)
