"""`trainer plot`: pictures of your gradient against the right one, on demand."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from trainer import console
from trainer.catalog import FOLDER_SETTINGS, folder_feedback
from trainer.checking.runner import run_check
from trainer.commands.common import (
    LEARN_PANEL,
    ExercisesDirOption,
    WorkspaceOption,
    open_session,
)
from trainer.errors import TrainerError, WorkspaceError

app = typer.Typer(add_completion=False)


@app.command(rich_help_panel=LEARN_PANEL)
def plot(
    ctx: typer.Context,
    exercise_id: Annotated[str | None, typer.Argument(help="Exercise (default: current).")] = None,
    file: Annotated[
        Path | None,
        typer.Option(
            "--file", "-f", help="Draw this file's gradient instead of the scratch file's."
        ),
    ] = None,
    workspace: WorkspaceOption = None,
    exercises_dir: ExercisesDirOption = None,
) -> None:
    """Draw your gradient against the right one: a slope curve, or a map of wrong elements.

    The slope curve (gradient ÷ grad_output against the input) is for an
    element-wise exercise; the error map for the others.

    Example: trainer plot sigmoid
    """
    session = open_session(ctx, workspace, exercises_dir)
    exercise = session.exercise(exercise_id)
    level = folder_feedback(exercise)
    if level != "full":
        raise TrainerError(
            f"plot draws the right gradient, and {exercise.id}'s exercise folder sets "
            f"feedback: {level} (its {FOLDER_SETTINGS}), which keeps the checker's values "
            "hidden. Use trainer check."
        )
    path = file if file is not None else session.scratch_file(exercise)
    if not path.is_file():
        raise WorkspaceError(f"no file at {path}. Check the path given to --file.")
    report = run_check(
        exercise, path, solution=session.catalog.solution_path(exercise), draw_always=True
    )
    if not console.pictures(report, True):
        failed = report.first_failure
        reason = f": {failed.title} failed first ({failed.message})" if failed else ""
        console.out.print(f"Nothing to draw for {path.name}{reason}.", markup=False)
