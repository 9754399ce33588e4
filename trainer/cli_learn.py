"""The learner's commands: start, hint, quiz, list, next, open, reset, solution, interview.

Each calls the core and renders through :mod:`trainer.console`, nothing more.
None of them imports torch.
"""

import subprocess
from typing import Annotated

import typer

from trainer import console
from trainer.cli_common import (
    LEARN_PANEL,
    ExerciseArgument,
    ExercisesDirOption,
    Session,
    WorkspaceOption,
    complete_exercise,
)
from trainer.errors import TrainerError
from trainer.interview import DEFAULT_MINUTES
from trainer.spec import TRACKS, Exercise
from trainer.workspace import editor_command, reset_all, reset_scratch

app = typer.Typer(add_completion=False)


@app.command(rich_help_panel=LEARN_PANEL)
def start(
    ctx: typer.Context,
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
    exercises_dir: ExercisesDirOption = None,
) -> None:
    """Write the exercise's scratch file and make it the current exercise.

    Example: trainer start sigmoid
    """
    session = Session(ctx, workspace, exercises_dir)
    session.start(session.catalog.get(exercise_id), force=force)


@app.command(rich_help_panel=LEARN_PANEL)
def hint(
    ctx: typer.Context,
    exercise_id: ExerciseArgument = None,
    show_all: Annotated[bool, typer.Option("--all", help="Show every hint at once.")] = False,
    workspace: WorkspaceOption = None,
    exercises_dir: ExercisesDirOption = None,
) -> None:
    """Reveal the next hint for an exercise (each call shows one more).

    Example: trainer hint linear
    """
    from trainer.hints import reveal_all_hints, reveal_next_hint

    session = Session(ctx, workspace, exercises_dir)
    exercise = session.exercise(exercise_id)
    store = session.writable_store()
    if show_all:
        reveal_all_hints(exercise, store)
        session.show_notices()
        console.all_hints(exercise)
        return
    reveal = reveal_next_hint(exercise, store)
    session.show_notices()
    console.hint(exercise, reveal.number, reveal.text, reveal.last)


@app.command(rich_help_panel=LEARN_PANEL)
def quiz(
    ctx: typer.Context,
    exercise_id: ExerciseArgument = None,
    seed: Annotated[
        int | None,
        typer.Option(
            min=0, help="Seed for the order of the choices (default: a new order each time)."
        ),
    ] = None,
    workspace: WorkspaceOption = None,
    exercises_dir: ExercisesDirOption = None,
) -> None:
    """Answer the exercise's multiple-choice questions, choices shuffled; the best score is kept.

    Example: trainer quiz sigmoid
    """
    session = Session(ctx, workspace, exercises_dir)
    run_quiz(session, session.exercise(exercise_id), seed)


def run_quiz(session: Session, exercise: Exercise, seed: int | None = None) -> None:
    """Ask every question, then keep the score (nothing is saved when input runs out)."""
    from trainer.quiz import parse_choice, record_score, shuffled

    questions = shuffled(exercise.quiz, seed)
    score = 0
    total = len(questions)
    for number, question in enumerate(questions, start=1):
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
    best = record_score(exercise, session.writable_store(), score)
    session.show_notices()
    console.quiz_score(exercise, score, total, best)


@app.command("list", rich_help_panel=LEARN_PANEL)
def list_exercises(
    ctx: typer.Context,
    workspace: WorkspaceOption = None,
    exercises_dir: ExercisesDirOption = None,
) -> None:
    """List the exercises with difficulty and your progress.

    Example: trainer list
    """
    from trainer.state import State

    session = Session(ctx, workspace, exercises_dir)
    state = session.store.load() if session.exists else State()
    session.show_notices()
    console.exercise_list(
        session.catalog.all, state, session.workspace.root if session.exists else None
    )


def _complete_track(incomplete: str) -> list[str]:
    return [t for t in TRACKS if t.startswith(incomplete)]


@app.command("next", rich_help_panel=LEARN_PANEL)
def next_exercise(
    ctx: typer.Context,
    track: Annotated[
        str | None,
        typer.Option(
            "--track",
            "-t",
            help=f"Pick within one track: {', '.join(TRACKS)}.",
            show_default=False,
            autocompletion=_complete_track,
        ),
    ] = None,
    workspace: WorkspaceOption = None,
    exercises_dir: ExercisesDirOption = None,
) -> None:
    """Start the first exercise you have not passed yet, in the order of `trainer list`.

    Example: trainer next --track losses
    """
    if track is not None and track not in TRACKS:
        raise typer.BadParameter(
            f"{track!r} is not a track; the tracks are {', '.join(TRACKS)}.",
            param_hint="'--track'",
        )
    session = Session(ctx, workspace, exercises_dir)
    exercise = session.first_not_passed(track)
    if exercise is None:
        exercises = [e for e in session.catalog.all if track is None or e.track == track]
        console.all_passed(len(exercises), TRACKS.get(track or ""))
        return
    session.start(exercise)


@app.command("open", rich_help_panel=LEARN_PANEL)
def open_exercise(
    ctx: typer.Context,
    exercise_id: ExerciseArgument = None,
    workspace: WorkspaceOption = None,
    exercises_dir: ExercisesDirOption = None,
) -> None:
    """Open the exercise's scratch file in your editor ($VISUAL, else $EDITOR).

    Example: trainer open sigmoid
    """
    session = Session(ctx, workspace, exercises_dir)
    path = session.scratch_file(session.exercise(exercise_id))
    command = editor_command()
    if command is None:
        console.no_editor(path)
        return
    shown = " ".join(command)
    try:
        code = subprocess.run([*command, str(path)], check=False).returncode
    except OSError as error:
        raise TrainerError(
            f"cannot run your editor `{shown}`: {error.strerror}. Fix $VISUAL or $EDITOR, "
            f"or open {path} yourself."
        ) from None
    if code != 0:
        raise TrainerError(f"your editor `{shown}` stopped with exit code {code} on {path}.")


@app.command(rich_help_panel=LEARN_PANEL)
def reset(
    ctx: typer.Context,
    exercise_id: ExerciseArgument = None,
    every: Annotated[
        bool,
        typer.Option("--all", help="Every scratch file of the workspace, after one confirmation."),
    ] = False,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="With --all: do not ask (for scripts).")
    ] = False,
    workspace: WorkspaceOption = None,
    exercises_dir: ExercisesDirOption = None,
) -> None:
    """Put the stub back in the scratch file; your current file is backed up first.

    Example: trainer reset linear
    """
    session = Session(ctx, workspace, exercises_dir)
    if not every:
        exercise = session.exercise(exercise_id)
        path, backup = reset_scratch(session.workspace, exercise)
        console.reset_done(exercise, path, backup)
        return
    if exercise_id is not None:
        raise typer.BadParameter("give an exercise or --all, not both.", param_hint="'--all'")
    files = session.workspace.scratch_files(session.catalog.all) if session.exists else []
    if not files:
        console.out.print(f"No scratch files in {session.workspace.root}: nothing to reset.")
        return
    question = (
        f"Reset {console.plural(len(files), 'scratch file')} in {session.workspace.root} to "
        "their stubs? Each edited file is backed up first."
    )
    if not yes:
        if not console.is_interactive():
            raise TrainerError(
                f"`trainer reset --all` would reset {console.plural(len(files), 'file')}; "
                "it asks first, and there is no terminal to ask. Add --yes to go ahead."
            )
        if not console.ask_yes_no(question, default=False):
            console.out.print("Nothing was reset.")
            return
    for exercise, path, backup in reset_all(session.workspace, session.catalog.all):
        console.reset_done(exercise, path, backup)


@app.command(rich_help_panel=LEARN_PANEL)
def solution(
    ctx: typer.Context,
    exercise_id: ExerciseArgument = None,
    force: Annotated[
        bool, typer.Option("--force", help="Show it even though you have not passed yet.")
    ] = False,
    workspace: WorkspaceOption = None,
    exercises_dir: ExercisesDirOption = None,
) -> None:
    """Show the reference solution, with what to notice; after a pass, or with --force.

    Example: trainer solution sigmoid
    """
    session = Session(ctx, workspace, exercises_dir)
    exercise = session.exercise(exercise_id)
    path = session.catalog.solution_path(exercise)
    if not path.is_file():
        raise TrainerError(f"no reference solution is bundled for `{exercise.id}` ({path}).")
    passed = session.exists and session.store.load().progress(exercise.id).passed
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
        with session.writable_store().update() as state:
            state.progress(exercise.id).solution_seen = True
    console.solution(exercise, path.read_text(encoding="utf-8"), passed)


@app.command(rich_help_panel=LEARN_PANEL)
def interview(
    ctx: typer.Context,
    exercise_id: Annotated[
        str | None,
        typer.Argument(
            metavar="EXERCISE",
            help="Exercise id; a random one you have not passed when left out.",
            show_default=False,
            autocompletion=complete_exercise,
        ),
    ] = None,
    minutes: Annotated[float, typer.Option(min=1.0, help="Time allowed.")] = DEFAULT_MINUTES,
    stop: Annotated[bool, typer.Option("--stop", help="End the interview under way.")] = False,
    workspace: WorkspaceOption = None,
    exercises_dir: ExercisesDirOption = None,
) -> None:
    """A timed interview: one exercise against the clock, with checks and hints counted.

    Example: trainer interview --minutes 30
    """
    import random

    from trainer import interview as interviews

    session = Session(ctx, workspace, exercises_dir)
    store = session.writable_store()
    if stop:
        summary = interviews.stop(store)
        if summary is None:
            raise TrainerError("no interview is under way. Start one with `trainer interview`.")
        console.interview_summary(summary)
        return
    if exercise_id is not None:
        exercise = session.catalog.get(exercise_id)
    else:
        exercise = interviews.pick_exercise(session.catalog.all, store.load(), random.Random())
    started = interviews.begin(store, exercise, minutes)
    # A fresh stub: an edited file from earlier practice is backed up, never lost.
    result = session.workspace.start(exercise, force=True)
    session.show_notices()
    console.started(exercise, result)
    console.interview_started(exercise, started.minutes)
