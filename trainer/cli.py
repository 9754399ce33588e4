"""The `trainer` command: typer definitions only. Each command calls the core and renders.

No `from __future__ import annotations` in the CLI modules: typer would then
evaluate every annotation string of every command at each start (~10 ms).
"""

import functools
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, ParamSpec

import typer

from trainer import console
from trainer.catalog import Catalog
from trainer.errors import ExitCode, SpecFieldError, TrainerError, WorkspaceError
from trainer.spec import Exercise
from trainer.state import STATE_FILE, StateStore
from trainer.workspace import Workspace, resolve_workspace

if TYPE_CHECKING:
    from trainer.interview import InterviewSummary

app = typer.Typer(
    name="trainer",
    help="Practise writing backward passes of custom torch.autograd.Function classes.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

P = ParamSpec("P")

SPEC_ADVICE = "Fix that field of the spec; docs/spec-format.md describes every field."

# Extra catalogue folders from the global --exercises-dir option.
_EXERCISE_DIRS: list[Path] = []


@app.callback()
def _global_options(
    exercises_dir: Annotated[
        list[Path] | None,
        typer.Option(
            "--exercises-dir",
            help="Another folder of exercises (repeatable) [env: TRAINER_EXERCISES, "
            "path-separated].",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Practise writing backward passes of custom torch.autograd.Function classes."""
    _EXERCISE_DIRS[:] = exercises_dir or []


def _command(name: str | None = None) -> Callable[[Callable[P, None]], Callable[P, None]]:
    """``app.command`` that turns expected failures into one line on stderr and an exit code."""

    def register(function: Callable[P, None]) -> Callable[P, None]:
        @functools.wraps(function)
        def guarded(*args: P.args, **kwargs: P.kwargs) -> None:
            try:
                _end_interview_if_time_is_up(kwargs.get("workspace"))
                function(*args, **kwargs)
            except SpecFieldError as problem:
                # One line: the file and field first, then what to do.
                console.error(f"{problem.message}. {SPEC_ADVICE}")
                raise typer.Exit(problem.exit_code) from None
            except TrainerError as problem:
                console.error(problem.message)
                raise typer.Exit(problem.exit_code) from None
            except KeyboardInterrupt:
                console.error("interrupted.")
                raise typer.Exit(ExitCode.INTERRUPTED) from None

        app.command(name)(guarded)
        return guarded

    return register


def _end_interview_if_time_is_up(workspace: object) -> None:
    """Any command notices an interview whose time ran out, and shows its summary."""
    root = resolve_workspace(workspace if isinstance(workspace, Path) else None)
    if not (root / STATE_FILE).is_file():
        return
    from trainer.interview import expire_if_due

    store = StateStore(root)
    summary = expire_if_due(store)
    for message in store.notices:  # a damaged progress file is reported here, once
        console.notice(message)
    if summary is not None:
        console.interview_summary(summary)


def complete_exercise(incomplete: str) -> list[str]:
    """Shell completion for exercise ids (no torch, just file names)."""
    try:
        return [i for i in Catalog.default().ids() if i.startswith(incomplete)]
    except TrainerError:
        return []


WorkspaceOption = Annotated[
    Path | None,
    typer.Option(
        "--workspace",
        "-w",
        help="Folder for scratch files and progress [env: TRAINER_WORKSPACE; "
        "default: ./trainer-workspace].",
        show_default=False,
    ),
]
ExerciseArgument = Annotated[
    str | None,
    typer.Argument(
        help="Exercise id (see `trainer list`); defaults to the current one.",
        show_default=False,
        autocompletion=complete_exercise,
    ),
]


class _Context:
    """What every command needs: the catalogue, the workspace and its progress file."""

    def __init__(self, workspace_option: Path | None) -> None:
        self.catalog = Catalog.default(_EXERCISE_DIRS)
        self.workspace = Workspace(resolve_workspace(workspace_option))
        self.store = StateStore(self.workspace.root)

    def exercise(self, exercise_id: str | None) -> Exercise:
        if exercise_id is not None:
            return self.catalog.get(exercise_id)
        current = self.store.load().current if self.workspace.root.is_dir() else None
        if current is None:
            raise TrainerError(
                "no current exercise in this workspace. Start one with `trainer start sigmoid` "
                "(see `trainer list`), or name it: `trainer check sigmoid`."
            )
        return self.catalog.get(current)

    def writable_store(self) -> StateStore:
        self.workspace.ensure()
        return self.store

    def start(self, exercise: Exercise, force: bool = False) -> None:
        """Write the scratch file (never over edits without a backup) and make it current."""
        result = self.workspace.start(exercise, force=force)
        with self.store.update() as state:
            state.current = exercise.id
            state.progress(exercise.id).started = True
        self.show_notices()
        console.started(exercise, result)

    def record_check(
        self, exercise: Exercise, passed: bool
    ) -> tuple[float | None, "InterviewSummary | None"]:
        """Count a check in the progress file and in an interview under way on it.

        Returns the interview's time left and, when this check ended it, its summary.
        """
        if not self.workspace.root.is_dir():
            return None, None
        from trainer.interview import record_check

        with self.store.update() as state:
            progress = state.progress(exercise.id)
            progress.checks += 1
            progress.started = True
            progress.passed = progress.passed or passed
        return record_check(self.store, exercise.id, passed)

    def show_notices(self) -> None:
        for message in self.store.notices:
            console.notice(message)
        self.store.notices.clear()


@_command()
def start(
    exercise_id: Annotated[
        str,
        typer.Argument(
            metavar="EXERCISE", help="Exercise id, e.g. sigmoid.", autocompletion=complete_exercise
        ),
    ],
    force: Annotated[
        bool,
        typer.Option("--force", help="Replace an edited scratch file (a backup is kept first)."),
    ] = False,
    workspace: WorkspaceOption = None,
) -> None:
    """Write the exercise's scratch file and make it the current exercise.

    Example: trainer start sigmoid
    """
    context = _Context(workspace)
    context.start(context.catalog.get(exercise_id), force=force)


@_command()
def check(
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
    ] = 30.0,
    seed: Annotated[
        int, typer.Option(help="Seed for the random inputs and upstream gradients.")
    ] = 0,
    double_backward: Annotated[
        bool,
        typer.Option("--double-backward", help="Also check second derivatives through backward."),
    ] = False,
    memory_limit: Annotated[
        int,
        typer.Option(
            "--memory-limit", min=64, help="MiB your code may allocate, on top of torch itself."
        ),
    ] = 4096,
    workspace: WorkspaceOption = None,
) -> None:
    """Check your backward pass: structure, forward and backward parity, gradcheck.

    Exit code 0 when every stage passes, 1 when any fails.

    Example: trainer check sigmoid --seed 3
    """
    from trainer.checking.runner import run_check

    context = _Context(workspace)
    exercise = context.exercise(exercise_id)
    path = file if file is not None else context.workspace.scratch_path(exercise.id)
    if not path.is_file():
        hint = (
            f" Run `trainer start {exercise.id}` to create it."
            if file is None
            else " Check the path given to --file."
        )
        raise WorkspaceError(f"no file at {path}.{hint}")
    report = run_check(
        exercise,
        path,
        seed=seed,
        timeout=timeout,
        solution=context.catalog.solution_path(exercise),
        double_backward=double_backward,
        memory_limit_mb=memory_limit,
    )
    left, summary = context.record_check(exercise, report.passed)
    context.show_notices()
    if as_json:
        console.print_json(json.dumps(report.to_dict(), indent=2))
    else:
        console.check_report(report, exercise, interview_left=left)
        if summary is not None:
            console.interview_summary(summary)
        if report.passed:
            if console.is_interactive() and console.ask_yes_no("Take the quiz now?"):
                _run_quiz(context, exercise)
            else:
                console.after_pass(exercise)
    raise typer.Exit(ExitCode.OK if report.passed else ExitCode.CHECKS_FAILED)


@_command()
def hint(
    exercise_id: ExerciseArgument = None,
    show_all: Annotated[bool, typer.Option("--all", help="Show every hint at once.")] = False,
    workspace: WorkspaceOption = None,
) -> None:
    """Reveal the next hint for an exercise (each call shows one more).

    Example: trainer hint linear
    """
    from trainer.hints import reveal_all_hints, reveal_next_hint

    context = _Context(workspace)
    exercise = context.exercise(exercise_id)
    store = context.writable_store()
    if show_all:
        reveal_all_hints(exercise, store)
        context.show_notices()
        console.all_hints(exercise)
        return
    reveal = reveal_next_hint(exercise, store)
    context.show_notices()
    console.hint(exercise, reveal.number, reveal.text, reveal.last)


@_command()
def quiz(exercise_id: ExerciseArgument = None, workspace: WorkspaceOption = None) -> None:
    """Answer the exercise's multiple-choice questions; the best score is kept.

    Example: trainer quiz sigmoid
    """
    context = _Context(workspace)
    _run_quiz(context, context.exercise(exercise_id))


def _run_quiz(context: _Context, exercise: Exercise) -> None:
    from trainer.quiz import parse_choice, record_score

    score = 0
    total = len(exercise.quiz)
    for number, question in enumerate(exercise.quiz, start=1):
        console.quiz_question(number, total, question)
        while True:
            answer = console.ask(f"Your answer (1-{len(question.choices)}): ")
            if answer is None:
                raise TrainerError(
                    "the quiz stopped: no more input. Nothing was saved; "
                    f"run `trainer quiz {exercise.id}` again."
                )
            choice = parse_choice(answer, question)
            if choice is not None:
                break
            console.out.print(f"Please type a number from 1 to {len(question.choices)}.")
        correct = choice == question.answer
        score += correct
        console.quiz_feedback(question, correct)
    best = record_score(exercise, context.writable_store(), score)
    context.show_notices()
    console.quiz_score(exercise, score, total, best)


@_command("list")
def list_exercises(workspace: WorkspaceOption = None) -> None:
    """List the exercises with difficulty and your progress.

    Example: trainer list
    """
    context = _Context(workspace)
    state = context.store.load() if context.workspace.root.is_dir() else None
    context.show_notices()
    from trainer.state import State

    console.exercise_list(context.catalog.all, state or State())


def main() -> None:
    """The console script. ``trainer CMD ...`` builds only CMD's command line parser
    (building all of them costs milliseconds every start); anything else, such as
    global options, `--help` or completion, goes through the whole app."""
    argv = sys.argv[1:]
    if argv and not argv[0].startswith("-") and not os.environ.get("_TRAINER_COMPLETE"):
        for info in app.registered_commands:
            assert info.callback is not None
            name = info.name or typer.main.get_command_name(info.callback.__name__)
            if name == argv[0]:
                command = typer.main.get_command_from_info(
                    info,
                    pretty_exceptions_short=app.pretty_exceptions_short,
                    rich_markup_mode=app.rich_markup_mode,
                )
                command.main(args=argv[1:], prog_name=f"trainer {name}")
                return
    app(prog_name="trainer")


# The other commands register themselves on the same app.
from trainer import cli_author, cli_session  # noqa: E402, F401
