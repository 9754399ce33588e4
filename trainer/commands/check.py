"""`trainer check`: check the learner's file in the checking process.

The checking defaults come from :mod:`trainer.checking.limits`, where they are
defined once; only `check`, `watch` and `grade` import the runner.

No `from __future__ import annotations`: typer reads the annotations at run time.
"""

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from trainer import console
from trainer.checking.limits import DEFAULT_MEMORY_LIMIT_MB, DEFAULT_SEED, DEFAULT_TIMEOUT
from trainer.commands.common import (
    LEARN_PANEL,
    ExerciseArgument,
    ExercisesDirOption,
    WorkspaceOption,
    open_session,
    show_notices,
)
from trainer.commands.quiz import run_quiz
from trainer.errors import ExitCode, WorkspaceError
from trainer.explain import after_check
from trainer.session import CheckOptions, Session

if TYPE_CHECKING:
    from trainer.spec import Exercise

OUTPUT_FOLDER = ".output"  # in the workspace: what `check --show-output` saw, whole

app = typer.Typer(add_completion=False)

MAX_SEED = 2**64 - 1  # torch.manual_seed takes seeds up to here


@app.command(rich_help_panel=LEARN_PANEL)
def check(
    ctx: typer.Context,
    exercise_id: ExerciseArgument = None,
    file: Annotated[
        Path | None,
        typer.Option("--file", "-f", help="Check this file instead of the scratch file."),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON document on stdout.")
    ] = False,
    timeout: Annotated[
        float, typer.Option(min=1.0, help="Seconds before the check is stopped.")
    ] = DEFAULT_TIMEOUT,
    seed: Annotated[
        int,
        typer.Option(
            min=0, max=MAX_SEED, help="Seed for the random inputs and upstream gradients."
        ),
    ] = DEFAULT_SEED,
    double_backward: Annotated[
        bool,
        typer.Option("--double-backward", help="Also check second derivatives through backward."),
    ] = False,
    memory_limit: Annotated[
        int,
        typer.Option(
            "--memory-limit", min=64, help="MiB your code may allocate, on top of torch itself."
        ),
    ] = DEFAULT_MEMORY_LIMIT_MB,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose", "-v", help="Show every stage's details, not only the first failure's."
        ),
    ] = False,
    show_output: Annotated[
        bool,
        typer.Option("--show-output", help="Show everything your code printed, pass or fail."),
    ] = False,
    plot: Annotated[
        bool | None,
        typer.Option(
            "--plot/--no-plot",
            help="Pictures of a wrong gradient under the report (default: on a wide terminal).",
        ),
    ] = None,
    workspace: WorkspaceOption = None,
    exercises_dir: ExercisesDirOption = None,
) -> None:
    """Check your backward pass: structure, forward and backward parity, gradcheck.

    Exit code 0 when every stage passes, 1 when any fails, 3 when the checker
    hit a bug (not your mistake: the traceback's file is named).

    Example: trainer check sigmoid --seed 3
    """
    session = open_session(ctx, workspace, exercises_dir)
    exercise = session.exercise(exercise_id)
    if file is None:
        path = session.scratch_file(exercise)
    elif not file.is_file() and not file.is_symlink():
        raise WorkspaceError(f"no file at {file}. Check the path given to --file.")
    else:
        path = file
    output_file = _output_file(session, exercise) if show_output else None
    options = CheckOptions(
        seed=seed,
        timeout=timeout,
        double_backward=double_backward,
        memory_limit_mb=memory_limit,
        output_file=output_file,
    )
    checked = session.check(exercise, path, options)
    report, counted = checked.report, checked.counted
    if counted.review_due is not None:
        console.review_result(exercise.id, report.passed, counted.review_due)
    show_notices(session)
    if as_json:
        document = report.to_dict()
        if checked.follow_up is not None:  # an exercise with follow-ups: as the API says it
            document["follow_up"] = checked.follow_up.to_dict()
        if not plot:  # the pictures' data only when asked for
            for stage in document["stages"]:
                stage.pop("pictures", None)
        console.print_json(json.dumps(document, indent=2))
    else:
        console.check_report(
            report,
            exercise,
            interview_left=counted.interview_left,
            verbose=verbose,
            show_output=show_output,
            output_file=output_file,
            summary=False,
        )
        console.pictures(report, plot)
        # Last, under the plot.
        console.check_summary(report, exercise, interview_left=counted.interview_left)
        if counted.interview_ended is not None:
            console.interview_summary(counted.interview_ended)
        follow_up = checked.follow_up
        asked = follow_up if follow_up is not None and follow_up.asked is not None else None
        if follow_up is not None and asked is None:
            console.follow_up_after_check(follow_up)
        if report.passed:
            after = after_check(session.store, exercise, passed=True)
            if after is not None:  # the derivation on the first pass, where it is on others
                console.after_pass_derivation(after)
            if asked is not None:  # the interview goes on: its question comes last
                console.interview_follow_up(exercise, asked, counted.interview_left)
            elif console.is_interactive() and console.ask_yes_no("Take the quiz now?"):
                run_quiz(session, exercise)
            else:
                console.after_pass(exercise)
    raise typer.Exit(ExitCode.CHECKER_BUG if report.bug else ExitCode.of_verdict(report.passed))


def _output_file(session: Session, exercise: "Exercise") -> Path:
    """Where ``--show-output`` keeps all a check's output: ``.output/EX.txt`` in the
    workspace (the last check's), or a temporary file where there is no workspace."""
    if session.exists:
        folder = session.workspace.root / OUTPUT_FOLDER
        folder.mkdir(exist_ok=True)
        return folder / f"{exercise.id}.txt"
    import tempfile

    handle, name = tempfile.mkstemp(prefix=f"trainer-{exercise.id}-", suffix=".txt")
    import os

    os.close(handle)
    return Path(name)
