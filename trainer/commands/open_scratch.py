"""`trainer open`: the scratch file in the learner's editor.

No `from __future__ import annotations`: typer reads the annotations at run time.
"""

import subprocess

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
from trainer.workspace import editor_command

app = typer.Typer(add_completion=False)


@app.command("open", rich_help_panel=LEARN_PANEL)
def open_exercise(
    ctx: typer.Context,
    exercise_id: ExerciseArgument = None,
    workspace: WorkspaceOption = None,
    exercises_dir: ExercisesDirOption = None,
) -> None:
    """Open the exercise's scratch file in your editor ($VISUAL, else $EDITOR).

    Example: trainer open sigmoid
    """
    session = open_session(ctx, workspace, exercises_dir)
    path = session.scratch_file(session.exercise(exercise_id))
    command = editor_command()
    if command is None:
        console.no_editor(path)
        return
    shown = " ".join(command)
    try:
        code = subprocess.run([*command, str(path)], check=False).returncode
    except OSError as error:
        raise TrainerError(
            f"cannot run your editor `{shown}`: {error.strerror}. Fix $VISUAL or $EDITOR, "
            f"or open {path} yourself."
        ) from None
    if code != 0:
        raise TrainerError(f"your editor `{shown}` stopped with exit code {code} on {path}.")
