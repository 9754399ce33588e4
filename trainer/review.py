"""Spaced review: passed exercises and missed quiz questions come due again.

An exercise comes due :data:`INTERVALS` days apart: one day after its first pass,
then 3, 7, 16 and 35 days after each clean review (one whose first check passes),
and twice the last interval after that. A failed review goes two steps back
(16 days become 3). The schedule is the exercise's ``review`` in progress:
``step`` (the index of the interval now running), ``due`` (seconds since the
epoch), ``open`` (when a review under way began, else None), ``counted``
(whether its first check is recorded), ``clean`` and ``failed`` (how many of
each). An exercise passed before the schedule existed (no ``review`` and no
``passed_at``) is due at once.

A review works in its own file, ``review/<id>.py`` in the workspace, written
afresh from the stub when it starts: the learner's solved scratch file is never
read or written. While a review is open, ``trainer check`` checks that file; its
first check records the review's result, and a pass closes it.

A quiz question answered wrongly is due a day later, and then as an exercise is;
three right answers in a row at review retire it. It is known by its quiz and
a hash of its text, so a question whose text changes is forgotten, not misread.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainer import history
from trainer.files import write_atomically
from trainer.history import DAY
from trainer.spec import Exercise, QuizQuestion, SharedQuiz
from trainer.state import MAX_QUIZ_REVIEWS, Progress, State, StateStore
from trainer.workspace import Workspace, scratch_text

INTERVALS = (1, 3, 7, 16, 35)  # days
STEPS_BACK_AFTER_A_FAILURE = 2
RIGHT_ANSWERS_TO_RETIRE = 3
REVIEW_FOLDER = "review"


def interval_days(step: int) -> float:
    """The interval of a step: :data:`INTERVALS`, then doubling past its end."""
    if step < len(INTERVALS):
        return float(INTERVALS[max(step, 0)])
    return float(INTERVALS[-1] * 2 ** (step - len(INTERVALS) + 1))


def review_path(workspace: Workspace, exercise_id: str) -> Path:
    return workspace.root / REVIEW_FOLDER / f"{exercise_id}.py"


def due_at(progress: Progress) -> float | None:
    """When the exercise's next review is due (None when it is not passed)."""
    if not progress.passed:
        return None
    schedule = progress.review or {}
    due = schedule.get("due")
    if isinstance(due, int | float):
        return float(due)
    if progress.passed_at is not None:
        return progress.passed_at + interval_days(0) * DAY
    return 0.0  # passed before the schedule existed: due now


def is_open(progress: Progress) -> bool:
    return bool(progress.review and progress.review.get("open") is not None)


@dataclass(frozen=True)
class DueExercise:
    exercise: Exercise
    due: float  # seconds since the epoch
    step: int


@dataclass(frozen=True)
class DueQuestion:
    quiz: Exercise | SharedQuiz
    number: int  # 1-based, in the quiz's own order
    question: QuizQuestion
    due: float


@dataclass(frozen=True)
class Agenda:
    """What is due now, and the next review after them."""

    exercises: list[DueExercise]
    questions: list[DueQuestion]
    next_due: float | None  # the earliest review that is not due yet
    next_what: str | None  # its exercise id, or "quiz QUIZ question N"
    any_passed: bool
    under_way: list[str] = field(default_factory=list)  # exercises with a review open

    @property
    def nothing_due(self) -> bool:
        return not self.exercises and not self.questions


def question_key(quiz_id: str, question: QuizQuestion) -> str:
    digest = hashlib.sha256(question.question.encode("utf-8")).hexdigest()[:12]
    return f"{quiz_id}:{digest}"


def agenda(
    state: State,
    exercises: Sequence[Exercise],
    quizzes: Sequence[SharedQuiz] = (),
    now: float | None = None,
) -> Agenda:
    """What is due at ``now``: exercises most overdue first, then questions."""
    now = history.CLOCK() if now is None else now
    due_exercises: list[DueExercise] = []
    later: list[tuple[float, str]] = []
    under_way: list[str] = []
    any_passed = False
    for exercise in exercises:
        progress = state.exercises.get(exercise.id)
        when = due_at(progress) if progress is not None else None
        if progress is None or when is None:
            continue
        any_passed = True
        if is_open(progress):
            under_way.append(exercise.id)
        if when <= now:
            step = int((progress.review or {}).get("step", 0))
            due_exercises.append(DueExercise(exercise, when, step))
        else:
            later.append((when, exercise.id))
    due_questions: list[DueQuestion] = []
    by_key: dict[str, tuple[Exercise | SharedQuiz, int, QuizQuestion]] = {}
    every: list[Exercise | SharedQuiz] = [*exercises, *quizzes]
    for quiz in every:
        for number, question in enumerate(quiz.quiz, start=1):
            by_key[question_key(quiz.id, question)] = (quiz, number, question)
    for key, entry in state.quiz_reviews.items():
        found = by_key.get(key)
        due = entry.get("due")
        if found is None or not isinstance(due, int | float):
            continue
        quiz, number, question = found
        if due <= now:
            due_questions.append(DueQuestion(quiz, number, question, float(due)))
        else:
            later.append((float(due), f"quiz {quiz.id} question {number}"))
    due_exercises.sort(key=lambda d: (d.due, d.exercise.id))
    due_questions.sort(key=lambda d: (d.due, d.quiz.id, d.number))
    next_due, next_what = min(later) if later else (None, None)
    return Agenda(due_exercises, due_questions, next_due, next_what, any_passed, under_way)


@dataclass(frozen=True)
class ReviewStart:
    path: Path
    resumed: bool  # a review under way goes on in its file, which is left as it is


def start_review(workspace: Workspace, store: StateStore, exercise: Exercise) -> ReviewStart:
    """Open a review of ``exercise`` in ``review/<id>.py``, written afresh from the stub
    (a review under way is resumed instead), and make the exercise current.

    The scratch file is not touched."""
    path = review_path(workspace, exercise.id)
    workspace.ensure()
    with store.update() as state:
        progress = state.progress(exercise.id)
        resumed = is_open(progress) and path.is_file()
        if not resumed:
            path.parent.mkdir(exist_ok=True)
            write_atomically(path, scratch_text(exercise))
            schedule: dict[str, Any] = dict(progress.review or {})
            schedule.setdefault("step", 0)
            schedule.update(open=history.CLOCK(), counted=False)
            progress.review = schedule
        state.current = exercise.id
    return ReviewStart(path, resumed)


def record_result(state: State, exercise_id: str, passed: bool) -> bool | None:
    """A check of an open review's file: the first moves the schedule on (a pass) or
    back (a failure), and a pass closes the review. Returns whether the first check
    was clean (None when this check is not a review's first)."""
    progress = state.progress(exercise_id)
    if not is_open(progress):
        return None
    assert progress.review is not None
    now = history.CLOCK()
    schedule = dict(progress.review)
    clean: bool | None = None
    if not schedule.get("counted"):
        clean = passed
        step = int(schedule.get("step", 0))
        step = step + 1 if passed else max(step - STEPS_BACK_AFTER_A_FAILURE, 0)
        schedule.update(step=step, due=now + interval_days(step) * DAY, counted=True, last=now)
        counter = "clean" if passed else "failed"
        schedule[counter] = int(schedule.get(counter, 0)) + 1
    if passed:
        schedule["open"] = None
    progress.review = schedule
    return clean


def record_quiz_answers(
    store: StateStore, quiz_id: str, answers: Sequence[tuple[QuizQuestion, bool]], reviewing: bool
) -> None:
    """:func:`record_answers` in a locked update of the progress file."""
    with store.update() as state:
        record_answers(state, quiz_id, answers, reviewing)


def record_answers(
    state: State, quiz_id: str, answers: Sequence[tuple[QuizQuestion, bool]], reviewing: bool
) -> None:
    """Answers to a quiz's questions: a wrong one is due tomorrow; a right one at
    review moves its interval on (and retires it after enough in a row)."""
    now = history.CLOCK()
    for question, right in answers:
        key = question_key(quiz_id, question)
        entry = state.quiz_reviews.get(key)
        if not right:
            state.quiz_reviews.pop(key, None)  # the newest last: trimming drops the oldest
            state.quiz_reviews[key] = {"step": 0, "due": now + interval_days(0) * DAY}
        elif entry is not None and (reviewing or float(entry.get("due", 0)) <= now):
            step = int(entry.get("step", 0)) + 1
            if step >= RIGHT_ANSWERS_TO_RETIRE:
                del state.quiz_reviews[key]
            else:
                entry.update(step=step, due=now + interval_days(step) * DAY)
    while len(state.quiz_reviews) > MAX_QUIZ_REVIEWS:
        del state.quiz_reviews[next(iter(state.quiz_reviews))]
