"""`trainer grade`: check a class's submissions in parallel.

No `from __future__ import annotations`: typer reads the annotations at run time.
"""

import json
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer

from trainer import console
from trainer.checking.runner import DEFAULT_TIMEOUT
from trainer.commands.common import (
    AUTHOR_PANEL,
    ExercisesDirOption,
    Session,
    WorkspaceOption,
    complete_exercise,
)
from trainer.errors import TrainerError

app = typer.Typer(add_completion=False)


@app.command(rich_help_panel=AUTHOR_PANEL)
def grade(
    ctx: typer.Context,
    exercise_id: Annotated[
        str,
        typer.Argument(metavar="EXERCISE", help="Exercise id.", autocompletion=complete_exercise),
    ],
    submissions: Annotated[list[Path], typer.Argument(help="Submission files or folders of them.")],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON document on stdout.")
    ] = False,
    junit: Annotated[
        Path | None, typer.Option("--junit", help="Also write JUnit XML to this file.")
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
    """Check every submission of one exercise in parallel and summarise the class.

    Exit code 0 when grading completed, whatever the verdicts; 2 when it could not
    (an unknown exercise, no submissions, a --junit path that cannot be written).

    Example: trainer grade linear submissions/ --junit grades.xml
    """
    from trainer.checking.report import ProtectionLevel
    from trainer.grading import collect_submissions, junit_xml
    from trainer.grading import grade as run_grading

    session = Session(ctx, workspace, exercises_dir)
    exercise = session.catalog.get(exercise_id)
    files = collect_submissions(submissions)
    levels: list[ProtectionLevel | None] = []

    def heard(level: ProtectionLevel | None) -> None:
        levels.append(level)
        if not as_json:
            console.protection_level(level)

    with console.progress(f"Grading {exercise.id}", total=len(files)) as advance:
        grades = run_grading(
            exercise,
            files,
            jobs=jobs,
            timeout=timeout,
            on_done=lambda _: advance(),
            unprotected=unprotected,
            on_protection=heard,
        )
    if junit is not None:
        try:
            junit.write_text(junit_xml(exercise, grades), encoding="utf-8")
        except OSError as error:
            raise TrainerError(
                f"cannot write {junit}: {error.strerror}. Choose another path."
            ) from None
    if as_json:
        level = levels[0] if levels else None
        document = {
            "exercise": exercise.id,
            "protection": level.to_dict() if level is not None else None,
            "grades": [asdict(g) for g in grades],
        }
        console.print_json(json.dumps(document, indent=2))
    else:
        console.grade_table(exercise.id, grades, junit)
