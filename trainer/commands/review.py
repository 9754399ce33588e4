"""`trainer review`: spaced review of passed exercises and missed quiz questions.

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
from trainer.review import Agenda, DueQuestion
from trainer.session import Session

app = typer.Typer(add_completion=False)

NOT_PASSED = (
    "`{id}` is not passed yet: a review comes after a pass. Work on it with "
    "`trainer start {id}`, or see what is due with `trainer review`."
)


def _agenda(session: Session) -> Agenda:
    from trainer.review import agenda
    from trainer.state import State

    state = session.store.load() if session.exists else State()
    concepts = session.catalog.shared_quiz("concepts")
    return agenda(state, session.catalog.all, [concepts] if concepts else [])


@app.command("review", rich_help_panel=LEARN_PANEL)
def review(
    ctx: typer.Context,
    exercise_id: ExerciseArgument = None,
    quiz: Annotated[
        bool, typer.Option("--quiz", help="Answer the quiz questions due for review.")
    ] = False,
    workspace: WorkspaceOption = None,
    exercises_dir: ExercisesDirOption = None,
) -> None:
    """Review what is due: an exercise passed days ago, afresh in review/EX.py (your
    solved file is never touched), or quiz questions you answered wrongly.

    Intervals grow after each clean review (1, 3, 7, 16, 35 days) and shrink after a
    failed one. With EXERCISE, review it now, due or not.

    Example: trainer review
    """
    from trainer.review import start_review

    session = open_session(ctx, workspace, exercises_dir)
    show_notices(session)
    due = _agenda(session)
    if exercise_id is not None:
        exercise = session.catalog.get(exercise_id)
        progress = session.store.load().exercises.get(exercise.id) if session.exists else None
        if progress is None or not progress.passed:
            raise TrainerError(NOT_PASSED.format(id=exercise.id))
    elif quiz or not due.exercises:
        if due.questions:
            _ask(session, due.questions)
        else:
            console.nothing_due(due, quiz=quiz)
        return
    else:
        exercise = due.exercises[0].exercise
    started = start_review(session.workspace, session.writable_store(), exercise)
    show_notices(session)
    console.review_started(exercise, started, _agenda(session))


def _ask(session: Session, questions: list[DueQuestion]) -> None:
    """Ask the due questions, choices shuffled; each answer moves its schedule."""
    from trainer.quiz import parse_choice, shuffled
    from trainer.review import record_quiz_answers

    right = 0
    for number, due in enumerate(questions, start=1):
        (question,) = shuffled([due.question], None)
        console.review_question(number, len(questions), due)
        console.quiz_question(number, len(questions), question)
        while True:
            answer = console.ask(f"Your answer (1-{len(question.choices)}): ")
            if answer is None:
                raise TrainerError(
                    "the review stopped: no more input. The questions answered so far are "
                    "kept; run `trainer review --quiz` again."
                )
            choice = parse_choice(answer, question)
            if choice is not None:
                break
            console.out.print(f"Please type a number from 1 to {len(question.choices)}.")
        correct = choice == question.answer
        right += correct
        console.quiz_feedback(question, correct)
        record_quiz_answers(
            session.writable_store(), due.quiz.id, [(due.question, correct)], reviewing=True
        )
    show_notices(session)
    console.review_answers(right, len(questions), _agenda(session))
