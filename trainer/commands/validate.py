"""`trainer validate`: every spec holds, its stub fails, its solution passes.

No `from __future__ import annotations`: typer reads the annotations at run time.
"""

import json
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

    Exit code 1 when anything falls short, 3 when a check hit a bug of the checker's.

    Example: trainer validate exercises/sigmoid.yaml
    """
    from trainer.authoring import shared_quiz_paths
    from trainer.authoring import validate as run_validation
    from trainer.errors import SpecError

    session = open_session(ctx, workspace, exercises_dir)
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
    if any(r.bug for r in results):  # no verdict where a bug of ours stopped a check
        raise typer.Exit(ExitCode.CHECKER_BUG)
    raise typer.Exit(ExitCode.of_verdict(all(r.ok for r in results)))
