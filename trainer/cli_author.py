"""Commands for instructors and exercise authors: validate, new and grade.

Each calls the core and renders through :mod:`trainer.console`, nothing more.
"""

import json
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer

from trainer import console
from trainer.checking.runner import DEFAULT_TIMEOUT
from trainer.cli_common import (
    AUTHOR_PANEL,
    ExercisesDirOption,
    Session,
    WorkspaceOption,
    complete_exercise,
)
from trainer.errors import ExitCode, TrainerError

app = typer.Typer(add_completion=False)


@app.command(rich_help_panel=AUTHOR_PANEL)
def validate(
    ctx: typer.Context,
    paths: Annotated[
        list[Path] | None,
        typer.Argument(help="Spec files (exercises/<id>.yaml); every exercise when left out."),
    ] = None,
    jobs: Annotated[
        int | None, typer.Option(min=1, help="Checks at once (default: every core).")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON document on stdout.")
    ] = False,
    workspace: WorkspaceOption = None,
    exercises_dir: ExercisesDirOption = None,
) -> None:
    """Check specs: the schema holds, the stub fails, the solution passes, each wrong variant fails.

    Also warns where the teaching content breaks a mechanical rule (the right
    answer is the longest choice, a question nearly repeats one of another
    exercise, the last hint holds code); warnings never fail.

    Exit code 1 when anything falls short.

    Example: trainer validate exercises/sigmoid.yaml
    """
    from trainer.authoring import shared_quiz_paths
    from trainer.authoring import validate as run_validation
    from trainer.errors import SpecError

    session = Session(ctx, workspace, exercises_dir)
    # The questions of the catalogue and its shared quizzes, for the near-duplicate
    # rule; a catalogue that cannot be read only matters when it is what is validated.
    catalogue: list[Path] = []
    shared: list[Path] = []
    try:
        catalogue = session.catalog.spec_paths()
        shared = shared_quiz_paths(session.catalog.roots)
    except SpecError:
        if not paths:
            raise
    if paths:
        missing = [p for p in paths if not p.is_file()]
        if missing:
            raise TrainerError(
                f"no spec file at {missing[0]}. Give paths like exercises/sigmoid.yaml."
            )
        specs = [(p, str(p)) for p in paths]
    else:
        specs = [(p, session.catalog.display_name(p)) for p in catalogue]
    with console.progress("Validating", total=None) as advance:
        results = run_validation(
            specs,
            jobs=jobs,
            on_done=advance,
            catalogue=catalogue,
            shared_quizzes=shared,
        )
    if as_json:
        document = {
            "ok": all(r.ok for r in results),
            "specs": [
                {
                    "spec": r.spec,
                    "id": r.exercise_id,
                    "ok": r.ok,
                    "problems": r.problems,
                    "warnings": r.warnings,
                }
                for r in results
            ],
        }
        console.print_json(json.dumps(document, indent=2))
    else:
        console.validation_table(results)
    raise typer.Exit(ExitCode.of_verdict(all(r.ok for r in results)))


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

    session = Session(ctx, workspace, exercises_dir)
    if exercise_id in session.catalog.ids():
        raise TrainerError(
            f"an exercise called `{exercise_id}` exists already in {session.catalog.where()}. "
            "Choose another id."
        )
    files = scaffold(root, exercise_id)
    console.scaffolded(exercise_id, files, root)


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
    workspace: WorkspaceOption = None,
    exercises_dir: ExercisesDirOption = None,
) -> None:
    """Check every submission of one exercise in parallel and summarise the class.

    Exit code 0 when grading completed, whatever the verdicts; 2 when it could not
    (an unknown exercise, no submissions, a --junit path that cannot be written).

    Example: trainer grade linear submissions/ --junit grades.xml
    """
    from trainer.grading import collect_submissions, junit_xml
    from trainer.grading import grade as run_grading

    session = Session(ctx, workspace, exercises_dir)
    exercise = session.catalog.get(exercise_id)
    files = collect_submissions(submissions)
    with console.progress(f"Grading {exercise.id}", total=len(files)) as advance:
        grades = run_grading(
            exercise, files, jobs=jobs, timeout=timeout, on_done=lambda _: advance()
        )
    if junit is not None:
        try:
            junit.write_text(junit_xml(exercise, grades), encoding="utf-8")
        except OSError as error:
            raise TrainerError(
                f"cannot write {junit}: {error.strerror}. Choose another path."
            ) from None
    if as_json:
        document = {"exercise": exercise.id, "grades": [asdict(g) for g in grades]}
        console.print_json(json.dumps(document, indent=2))
    else:
        console.grade_table(exercise.id, grades, junit)
