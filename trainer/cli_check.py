"""The commands that run checks: check, and watch (a check on every save).

The checking defaults come from :mod:`trainer.checking.runner`, where they are
defined once; importing it here (not in the other command modules) keeps
`trainer hint` from paying for it. Neither command imports torch: checks run in
the checking process.
"""

import json
import queue
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from trainer import console
from trainer.checking.runner import (
    DEFAULT_MEMORY_LIMIT_MB,
    DEFAULT_SEED,
    DEFAULT_TIMEOUT,
    run_check,
)
from trainer.cli_common import (
    LEARN_PANEL,
    ExerciseArgument,
    ExercisesDirOption,
    Session,
    WorkspaceOption,
)
from trainer.cli_learn import run_quiz
from trainer.errors import ExitCode, WorkspaceError
from trainer.spec import Exercise

if TYPE_CHECKING:
    from trainer.checking.runner import CheckingService

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
    workspace: WorkspaceOption = None,
    exercises_dir: ExercisesDirOption = None,
) -> None:
    """Check your backward pass: structure, forward and backward parity, gradcheck.

    Exit code 0 when every stage passes, 1 when any fails.

    Example: trainer check sigmoid --seed 3
    """
    session = Session(ctx, workspace, exercises_dir)
    exercise = session.exercise(exercise_id)
    if file is None:
        path = session.scratch_file(exercise)
    elif not file.is_file():
        raise WorkspaceError(f"no file at {file}. Check the path given to --file.")
    elif not file.read_bytes().strip():
        raise WorkspaceError(f"{file} is empty: nothing to check. Check the path given to --file.")
    else:
        path = file
    report = run_check(
        exercise,
        path,
        seed=seed,
        timeout=timeout,
        solution=session.catalog.solution_path(exercise),
        double_backward=double_backward,
        memory_limit_mb=memory_limit,
    )
    left, summary = session.record_check(exercise, report.passed)
    session.show_notices()
    if as_json:
        console.print_json(json.dumps(report.to_dict(), indent=2))
    else:
        console.check_report(report, exercise, interview_left=left, verbose=verbose)
        if summary is not None:
            console.interview_summary(summary)
        if report.passed:
            if console.is_interactive() and console.ask_yes_no("Take the quiz now?"):
                run_quiz(session, exercise)
            else:
                console.after_pass(exercise)
    raise typer.Exit(ExitCode.of_verdict(report.passed))


@dataclass
class _Watched:
    """What watch mode is on: the exercise, its last verdict, the warm checker."""

    exercise: Exercise
    passed: bool = False
    warm: "CheckingService | None" = None


@app.command(rich_help_panel=LEARN_PANEL)
def watch(
    ctx: typer.Context,
    exercise_id: ExerciseArgument = None,
    poll: Annotated[
        bool,
        typer.Option(
            "--poll", help="Poll for changes (for file systems without events, e.g. WSL)."
        ),
    ] = False,
    workspace: WorkspaceOption = None,
    exercises_dir: ExercisesDirOption = None,
) -> None:
    """Re-check every time you save; keys: h hint, c check, n next (after a pass), q quit.

    Example: trainer watch sigmoid
    """
    from trainer.checking.runner import CheckingService
    from trainer.hints import reveal_next_hint
    from trainer.watch import keyboard, watch_loop

    session = Session(ctx, workspace, exercises_dir)
    watched = _Watched(session.exercise(exercise_id))
    session.scratch_file(watched.exercise)

    def path() -> Path:
        return session.workspace.scratch_path(watched.exercise.id)

    def check() -> None:
        console.clear()
        console.out.print(f"Checking {path().name}…")
        if watched.warm is None:
            # torch is imported once; every re-check is a fork of this process.
            watched.warm = CheckingService()
        exercise = watched.exercise
        report = run_check(
            exercise, path(), solution=session.catalog.solution_path(exercise), service=watched.warm
        )
        session.record_check(exercise, report.passed)
        watched.passed = report.passed
        console.clear()  # each verdict on a clean screen
        console.check_report(report, exercise, watching=True)
        console.watch_keys(report.passed)

    def on_key(key: str) -> bool:
        if key == "q":
            return False
        if key == "c":
            check()
        elif key == "h":
            reveal = reveal_next_hint(watched.exercise, session.writable_store())
            console.hint(watched.exercise, reveal.number, reveal.text, reveal.last, watching=True)
        elif key == "n" and watched.passed:
            following = session.first_not_passed()
            if following is None:
                console.all_passed(len(session.catalog.all))
                return False
            # The new statement first; its stub is checked at its first save (or c).
            console.clear()
            session.start(following, watching=True)
            watched.exercise, watched.passed = following, False
            console.watch_keys(passed=False)
        return True

    keys: queue.Queue[str] = queue.Queue()
    stop = threading.Event()
    try:
        with keyboard(keys, stop):
            watch_loop(path, check, on_key, keys, stop, poll=poll)
    except KeyboardInterrupt:
        pass
    finally:
        if watched.warm is not None:
            watched.warm.close()
    console.out.print("Stopped watching.")
