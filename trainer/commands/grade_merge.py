"""`trainer grade-merge`: one gradebook from the shards of a CI matrix.

No `from __future__ import annotations`: typer reads the annotations at run time.
"""

import json
from pathlib import Path
from typing import Annotated

import typer

from trainer.commands.common import AUTHOR_PANEL, ExercisesDirOption, WorkspaceOption
from trainer.commands.grade import (
    CsvOption,
    JsonOption,
    JunitOption,
    check_writable,
    emit_gradebook,
)
from trainer.errors import TrainerError

app = typer.Typer(add_completion=False)


@app.command("grade-merge", rich_help_panel=AUTHOR_PANEL)
def grade_merge(
    shards: Annotated[
        list[Path],
        typer.Argument(metavar="SHARD.json...", help="The JSON of each shard (grade --json)."),
    ],
    as_json: JsonOption = False,
    csv: CsvOption = None,
    junit: JunitOption = None,
    workspace: WorkspaceOption = None,
    exercises_dir: ExercisesDirOption = None,
) -> None:
    """Combine the shards' gradebooks (grade --shard K/N --json) into one.

    The result is the gradebook one unsharded run gives, in the class's order.
    Every shard must be given once. Exit code 0 when merged; 2 when it could not
    (a missing or repeated shard, shards of different gradings, unreadable JSON).

    Example: trainer grade-merge shard-*.json --csv grades.csv
    """
    from trainer.gradebook import Gradebook, merge

    del workspace, exercises_dir  # accepted as by every command; a merge reads only its shards

    check_writable(csv, junit)
    books = []
    for path in shards:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except OSError as error:
            raise TrainerError(f"cannot read {path}: {error.strerror}.") from None
        except (UnicodeDecodeError, ValueError) as error:
            raise TrainerError(f"{path}: not JSON ({error}).") from None
        books.append((str(path), Gradebook.from_dict(data, str(path))))
    emit_gradebook(merge(books), as_json=as_json, csv=csv, junit=junit)
