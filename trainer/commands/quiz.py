"""`trainer quiz`: the exercise's questions, choices shuffled; also asked after a pass.

No `from __future__ import annotations`: typer reads the annotations at run time.
"""

from typing import Annotated

import typer

from trainer import console
from trainer.commands.common import (
    LEARN_PANEL,
    ExerciseArgument,
    ExercisesDirOption,
    WorkspaceOption,
    open_session,
    show_notices,
)
from trainer.errors import TrainerError
from trainer.session import Session
from trainer.spec import Exercise, SharedQuiz

app = typer.Typer(add_completion=False)


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

    `trainer quiz concepts` asks the questions every exercise shares (grad_output,
    one gradient per input, what to save, in-place edits, kinks, gradcheck).

    Example: trainer quiz sigmoid
    """
    session = open_session(ctx, workspace, exercises_dir)
    shared = session.catalog.shared_quiz(exercise_id) if exercise_id else None
    run_quiz(session, shared or session.exercise(exercise_id), seed)


def run_quiz(session: Session, exercise: Exercise | SharedQuiz, seed: int | None = None) -> None:
    """Ask every question, then keep the score and the wrong answers for review
    (nothing is saved when input runs out)."""
    from trainer.quiz import parse_choice, record_score, shuffled
    from trainer.review import record_quiz_answers

    questions = shuffled(exercise.quiz, seed)
    answers = []
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
        answers.append((question, correct))
        console.quiz_feedback(question, correct)
    best = record_score(exercise, session.writable_store(), score)
    record_quiz_answers(session.store, exercise.id, answers, reviewing=False)
    show_notices(session)
    console.quiz_score(exercise, score, total, best)
