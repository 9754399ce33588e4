"""`trainer start`: write the scratch file and make the exercise current.

No `from __future__ import annotations`: typer reads the annotations at run time.
"""

from typing import Annotated

import typer

from trainer.commands.common import (
    LEARN_PANEL,
    ExercisesDirOption,
    WorkspaceOption,
    complete_exercise,
    open_session,
    start_exercise,
)

app = typer.Typer(add_completion=False)


@app.command(rich_help_panel=LEARN_PANEL)
def start(
    ctx: typer.Context,
    exercise_id: Annotated[
        str,
        typer.Argument(
            metavar="EXERCISE", help="Exercise id, e.g. sigmoid.", autocompletion=complete_exercise
        ),
    ],
    force: Annotated[
        bool,
        typer.Option("--force", help="Replace an edited scratch file (a backup is kept first)."),
    ] = False,
    workspace: WorkspaceOption = None,
    exercises_dir: ExercisesDirOption = None,
) -> None:
    """Write the exercise's scratch file and make it the current exercise.

    Example: trainer start sigmoid
    """
    session = open_session(ctx, workspace, exercises_dir)
    start_exercise(session, session.catalog.get(exercise_id), force=force)
