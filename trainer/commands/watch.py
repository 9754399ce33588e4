"""`trainer watch`: a check on every save, with single-key commands.

No `from __future__ import annotations`: typer reads the annotations at run time.
"""

import queue
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from trainer import console
from trainer.commands.common import (
    LEARN_PANEL,
    ExerciseArgument,
    ExercisesDirOption,
    WorkspaceOption,
    open_session,
    start_exercise,
)
from trainer.errors import ExitCode
from trainer.spec import Exercise

if TYPE_CHECKING:
    from trainer.checking.runner import CheckingService

app = typer.Typer(add_completion=False)


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
    from trainer.watch import drain, keyboard, watch_loop

    session = open_session(ctx, workspace, exercises_dir)
    watched = _Watched(session.exercise(exercise_id))
    session.scratch_file(watched.exercise)

    def path() -> Path:
        # The file the learner works in: an open review's own, an interview's, or the
        # scratch file (never the solved file during a review).
        review = session.review_file(watched.exercise)
        return review if review is not None else session.working_path(watched.exercise)

    def check() -> None:
        console.clear()
        console.out.print(f"Checking {path().name}…")
        if watched.warm is None:
            # torch is imported once; every re-check is a fork of this process.
            watched.warm = CheckingService()
        exercise = watched.exercise
        checked = session.check(exercise, path(), service=watched.warm)
        report, due = checked.report, checked.counted.review_due
        watched.passed = report.passed
        console.clear()  # each verdict on a clean screen
        console.check_report(report, exercise, watching=True)
        if due is not None:  # the first check of an open review: its result
            console.review_result(exercise.id, report.passed, due)
        follow_up = checked.follow_up
        if follow_up is not None and follow_up.asked is not None:  # an interview goes on
            console.interview_follow_up(exercise, follow_up, checked.counted.interview_left)
        elif follow_up is not None:
            console.follow_up_after_check(follow_up)

    def prompt() -> None:
        console.watch_keys(watched.passed)

    def on_key(key: str) -> bool:
        if key == "q":
            return False
        if key == "c":
            check()
            drain(keys)
            prompt()
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
            start_exercise(session, following, watching=True)
            watched.exercise, watched.passed = following, False
            console.watch_keys(passed=False)
        return True

    keys: queue.Queue[str] = queue.Queue()
    stop = threading.Event()
    interrupted = False
    try:
        with keyboard(keys, stop):
            watch_loop(path, check, on_key, keys, stop, poll=poll, prompt=prompt)
    except KeyboardInterrupt:  # Ctrl-C, during a check or between saves
        interrupted = True
    finally:
        if watched.warm is not None:
            watched.warm.close()
    console.out.print("Stopped watching.")
    if interrupted:
        raise typer.Exit(ExitCode.INTERRUPTED)  # 130, as `check` and `quiz` give
