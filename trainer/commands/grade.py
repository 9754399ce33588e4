"""`trainer grade`: check a class's submissions in parallel.

No `from __future__ import annotations`: typer reads the annotations at run time.
"""

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import click
import typer

from trainer import console
from trainer.checking.feedback import DEFAULT_FEEDBACK, FEEDBACK_LEVELS
from trainer.checking.limits import DEFAULT_TIMEOUT
from trainer.commands.common import (
    AUTHOR_PANEL,
    ExercisesDirOption,
    WorkspaceOption,
    complete_exercise,
    open_session,
)
from trainer.errors import TrainerError
from trainer.files import write_atomically

if TYPE_CHECKING:
    from trainer.gradebook import Gradebook

app = typer.Typer(add_completion=False)


FeedbackOption = Annotated[
    str,
    typer.Option(
        "--feedback",
        click_type=click.Choice(FEEDBACK_LEVELS),
        help="How much each report says: full (what a learner sees), summary (stages and "
        "mistakes, no values), verdict (pass or fail per stage). In every format.",
    ),
]
JsonOption = Annotated[
    bool, typer.Option("--json", help="Print the gradebook as one JSON document on stdout.")
]
CsvOption = Annotated[
    Path | None,
    typer.Option("--csv", help="Also write the gradebook as CSV, one row per submission."),
]
JunitOption = Annotated[
    Path | None,
    typer.Option("--junit", help="Also write JUnit XML, one test case per stage."),
]


@app.command(rich_help_panel=AUTHOR_PANEL)
def grade(
    ctx: typer.Context,
    exercise_id: Annotated[
        str,
        typer.Argument(metavar="EXERCISE", help="Exercise id.", autocompletion=complete_exercise),
    ],
    submissions: Annotated[list[Path], typer.Argument(help="Submission files or folders of them.")],
    as_json: JsonOption = False,
    csv: CsvOption = None,
    junit: JunitOption = None,
    feedback: FeedbackOption = DEFAULT_FEEDBACK,
    shard: Annotated[
        str | None,
        typer.Option(
            "--shard",
            metavar="K/N",
            help="Grade only share K of N (one job of a CI matrix); merge with grade-merge.",
        ),
    ] = None,
    timeout: Annotated[
        float, typer.Option(min=1.0, help="Seconds per submission.")
    ] = DEFAULT_TIMEOUT,
    jobs: Annotated[
        int | None, typer.Option(min=1, help="Checks at once (default: every core).")
    ] = None,
    unprotected: Annotated[
        bool,
        typer.Option(
            "--unprotected",
            help="Grade even where the machine cannot be protected from the submissions.",
        ),
    ] = False,
    workspace: WorkspaceOption = None,
    exercises_dir: ExercisesDirOption = None,
) -> None:
    """Check every submission of one exercise in parallel; score it stage by stage.

    A submission scores the weights of the stages it passes; one whose check a bug
    of the checker's stopped is a bug row (grade it again once fixed). Exit code 0
    when grading completed, whatever the verdicts; 2 when it could not (an unknown
    exercise, no submissions, a bad --shard, an output path that cannot be
    written); 3 when the checking server hit a bug.

    Example: trainer grade linear submissions/ --csv grades.csv --junit grades.xml
    """
    from trainer.checking.report import ProtectionLevel
    from trainer.grading import collect_submissions, parse_shard, shard_of
    from trainer.grading import grade as run_grading

    session = open_session(ctx, workspace, exercises_dir)
    exercise = session.catalog.get(exercise_id)
    share = parse_shard(shard) if shard is not None else (1, 1)
    files = collect_submissions(submissions)
    check_writable(csv, junit)

    def heard(level: ProtectionLevel | None) -> None:
        if not as_json:
            console.protection_level(level)

    with console.progress(f"Grading {exercise.id}", total=len(shard_of(files, share))) as advance:
        book = run_grading(
            exercise,
            files,
            jobs=jobs,
            timeout=timeout,
            on_done=lambda _: advance(),
            unprotected=unprotected,
            on_protection=heard,
            feedback=feedback,
            shard=share,
        )
    emit_gradebook(book, as_json=as_json, csv=csv, junit=junit)


def check_writable(*paths: Path | None) -> None:
    """Before any grading: each output goes into a folder that exists."""
    for path in paths:
        if path is not None and not path.parent.is_dir():
            raise TrainerError(
                f"cannot write {path}: no folder {path.parent}. Choose another path."
            )


def emit_gradebook(
    book: "Gradebook", *, as_json: bool, csv: Path | None, junit: Path | None
) -> None:
    """Write the files asked for, then the JSON document or the table."""
    from trainer.gradebook import gradebook_csv, gradebook_junit

    written = []
    for path, render in ((csv, gradebook_csv), (junit, gradebook_junit)):
        if path is None:
            continue
        try:
            write_atomically(path, render(book))
        except OSError as error:
            raise TrainerError(
                f"cannot write {path}: {error.strerror}. Choose another path."
            ) from None
        written.append(path)
    if as_json:
        console.print_json(json.dumps(book.to_dict(), indent=2))
    else:
        console.grade_table(book, written)
