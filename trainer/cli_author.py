"""Commands for instructors and exercise authors: validate, new and grade."""

import json
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer

from trainer import console
from trainer.cli import _command, _Context, complete_exercise
from trainer.errors import ExitCode, TrainerError


@_command()
def validate(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(help="Spec files (exercises/<id>.yaml); every exercise when left out."),
    ] = None,
    jobs: Annotated[
        int | None, typer.Option(min=1, help="Checks at once [default: every core].")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON document on stdout.")
    ] = False,
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

    context = _Context(None)
    # The questions of the catalogue and its shared quizzes, for the near-duplicate
    # rule; a catalogue that cannot be read only matters when it is what is validated.
    catalogue: list[Path] = []
    shared: list[Path] = []
    try:
        catalogue = context.catalog.spec_paths()
        shared = shared_quiz_paths(context.catalog.roots)
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
        specs = [(p, context.catalog.display_name(p)) for p in catalogue]
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
    raise typer.Exit(ExitCode.OK if all(r.ok for r in results) else ExitCode.CHECKS_FAILED)


@_command()
def new(
    exercise_id: Annotated[
        str, typer.Argument(metavar="ID", help="The new exercise's id, e.g. my_softmax.")
    ],
    root: Annotated[
        Path, typer.Option(help="Folder that gets exercises/ and solutions/ (created if needed).")
    ] = Path("."),
) -> None:
    """Scaffold a spec, a reference solution and a wrong variant, every field explained.

    Example: trainer new my_softmax --root my-exercises
    """
    from trainer.authoring import scaffold

    files = scaffold(root, exercise_id)
    console.scaffolded(exercise_id, files, root)


@_command()
def grade(
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
    timeout: Annotated[float, typer.Option(min=1.0, help="Seconds per submission.")] = 30.0,
    jobs: Annotated[
        int | None, typer.Option(min=1, help="Checks at once [default: every core].")
    ] = None,
    unprotected: Annotated[
        bool,
        typer.Option(
            "--unprotected",
            help="Grade even where the machine cannot be protected from the submissions.",
        ),
    ] = False,
) -> None:
    """Check every submission of one exercise in parallel and summarise the class.

    Exit code 0 when grading completed, whatever the verdicts.

    Example: trainer grade linear submissions/ --junit grades.xml
    """
    from trainer.checking.report import ProtectionLevel
    from trainer.grading import collect_submissions, junit_xml
    from trainer.grading import grade as run_grading

    context = _Context(None)
    exercise = context.catalog.get(exercise_id)
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
