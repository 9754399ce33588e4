"""Commands around a learning session: next, reset, solution, watch and interview.

Registered on the app of :mod:`trainer.cli`; like the commands there, each calls
the core and renders, nothing more.
"""

import queue
import random
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from trainer import console
from trainer.cli import ExerciseArgument, WorkspaceOption, _command, _Context, complete_exercise
from trainer.errors import ExitCode, TrainerError
from trainer.spec import Exercise
from trainer.workspace import reset_scratch

if TYPE_CHECKING:
    from trainer.checking.runner import CheckingService


@dataclass
class _Watched:
    """What watch mode is on: the exercise, its last verdict, the warm checker."""

    exercise: Exercise
    passed: bool = False
    warm: "CheckingService | None" = None


def _first_not_passed(context: _Context) -> Exercise | None:
    state = context.store.load() if context.workspace.root.is_dir() else None
    for exercise in context.catalog.all:
        if state is None or not state.progress(exercise.id).passed:
            return exercise
    return None


@_command("next")
def next_exercise(workspace: WorkspaceOption = None) -> None:
    """Start the first exercise you have not passed yet.

    Example: trainer next
    """
    context = _Context(workspace)
    exercise = _first_not_passed(context)
    if exercise is None:
        console.all_passed(len(context.catalog.all))
        return
    context.start(exercise)


@_command()
def reset(exercise_id: ExerciseArgument = None, workspace: WorkspaceOption = None) -> None:
    """Put the stub back in the scratch file; your current file is backed up first.

    Example: trainer reset linear
    """
    context = _Context(workspace)
    exercise = context.exercise(exercise_id)
    path, backup = reset_scratch(context.workspace, exercise)
    console.reset_done(exercise, path, backup)


@_command()
def solution(
    exercise_id: ExerciseArgument = None,
    force: Annotated[
        bool, typer.Option("--force", help="Show it even though you have not passed yet.")
    ] = False,
    workspace: WorkspaceOption = None,
) -> None:
    """Show the reference solution, with what to notice; after a pass, or with --force.

    Example: trainer solution sigmoid
    """
    context = _Context(workspace)
    exercise = context.exercise(exercise_id)
    path = context.catalog.solution_path(exercise)
    if not path.is_file():
        raise TrainerError(f"no reference solution is bundled for `{exercise.id}` ({path}).")
    passed = context.workspace.root.is_dir() and context.store.load().progress(exercise.id).passed
    if not passed and not force:
        if not console.is_interactive():
            raise TrainerError(
                f"you have not passed `{exercise.id}` yet. Keep trying (`trainer hint` helps), "
                f"or see it anyway with `trainer solution {exercise.id} --force`."
            )
        if not console.ask_yes_no(
            f"You have not passed `{exercise.id}` yet. See the solution anyway?", default=False
        ):
            console.out.print("Good call. `trainer hint` reveals one more hint.")
            return
    if not passed:
        with context.writable_store().update() as state:
            state.progress(exercise.id).solution_seen = True
    console.solution(exercise, path.read_text(encoding="utf-8"), passed)


@_command()
def watch(
    exercise_id: ExerciseArgument = None,
    poll: Annotated[
        bool,
        typer.Option(
            "--poll", help="Poll for changes (for file systems without events, e.g. WSL)."
        ),
    ] = False,
    workspace: WorkspaceOption = None,
) -> None:
    """Re-check every time you save; keys: h hint, c check, n next (after a pass), q quit.

    Example: trainer watch sigmoid
    """
    from trainer.checking.runner import CheckingService, run_check
    from trainer.hints import reveal_next_hint
    from trainer.watch import keyboard, watch_loop

    context = _Context(workspace)
    watched = _Watched(context.exercise(exercise_id))

    def path() -> Path:
        return context.workspace.scratch_path(watched.exercise.id)

    if not path().is_file():
        raise TrainerError(
            f"no file at {path()}. Run `trainer start {watched.exercise.id}` to create it."
        )

    def check() -> None:
        console.clear()
        console.out.print(f"Checking {path().name}…")
        if watched.warm is None:
            # torch is imported once; every re-check is a fork of this process.
            watched.warm = CheckingService()
        exercise = watched.exercise
        report = run_check(
            exercise, path(), solution=context.catalog.solution_path(exercise), service=watched.warm
        )
        context.record_check(exercise, report.passed)
        watched.passed = report.passed
        console.clear()
        console.check_report(report, exercise)
        console.watch_keys(report.passed)

    def on_key(key: str) -> bool:
        if key == "q":
            return False
        if key == "c":
            check()
        elif key == "h":
            reveal = reveal_next_hint(watched.exercise, context.writable_store())
            console.hint(watched.exercise, reveal.number, reveal.text, reveal.last)
        elif key == "n" and watched.passed:
            following = _first_not_passed(context)
            if following is None:
                console.all_passed(len(context.catalog.all))
                return False
            context.start(following)
            watched.exercise = following
            check()
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


@_command()
def interview(
    exercise_id: Annotated[
        str | None,
        typer.Argument(
            help="Exercise id; a random one you have not passed when left out.",
            show_default=False,
            autocompletion=complete_exercise,
        ),
    ] = None,
    minutes: Annotated[float, typer.Option(min=1.0, help="Time allowed.")] = 40.0,
    stop: Annotated[bool, typer.Option("--stop", help="End the interview under way.")] = False,
    workspace: WorkspaceOption = None,
) -> None:
    """A timed interview: one exercise against the clock, with checks and hints counted.

    Example: trainer interview --minutes 30
    """
    from trainer import interview as interviews

    context = _Context(workspace)
    store = context.writable_store()
    if stop:
        summary = interviews.stop(store)
        if summary is None:
            raise TrainerError("no interview is under way. Start one with `trainer interview`.")
        console.interview_summary(summary)
        return
    state = store.load()
    if exercise_id is not None:
        exercise = context.catalog.get(exercise_id)
    else:
        exercise = interviews.pick_exercise(context.catalog.all, state, random.Random())
    started = interviews.begin(store, exercise, minutes)
    # A fresh stub: an edited file from earlier practice is backed up, never lost.
    result = context.workspace.start(exercise, force=True)
    context.show_notices()
    console.started(exercise, result)
    console.interview_started(exercise, started.minutes)
    raise typer.Exit(ExitCode.OK)
