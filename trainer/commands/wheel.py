"""`trainer wheel`: write the running trainer as a wheel file, to install where there is
no package index entry for it (a notebook, Colab, a Classroom repository).

No `from __future__ import annotations`: typer reads the annotations at run time.
"""

from pathlib import Path
from typing import Annotated

import typer

from trainer import console
from trainer.commands.common import AUTHOR_PANEL, ExercisesDirOption, WorkspaceOption

app = typer.Typer(add_completion=False)


@app.command(rich_help_panel=AUTHOR_PANEL)
def wheel(
    folder: Annotated[
        Path, typer.Option("--dir", help="The folder to write the wheel into.")
    ] = Path("."),
    workspace: WorkspaceOption = None,
    exercises_dir: ExercisesDirOption = None,
) -> None:
    """Write this trainer as a wheel file, to `pip install` where it is not on an index.

    The wheel holds the trainer and its bundled exercises; pip installs its other
    dependencies (torch, typer, rich...) from the index as usual. Exit code 0 when
    written; 2 when the folder cannot be written.

    Example: trainer wheel --dir .   then   pip install ./autograd_trainer-*.whl
    """
    from trainer.wheel import write_wheel

    del workspace, exercises_dir  # accepted as by every command; the wheel is the trainer's
    path = write_wheel(folder)
    console.wheel_written(path)
