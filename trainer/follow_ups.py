"""The interviewer's follow-ups after a pass (issue 31): which comes next, taking one
up, and recording a check of it. The checking itself is the engine's (the
``follow_up_*`` stages, switched on by ``Exercise.with_follow_up``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from trainer.spec import Exercise, FollowUp
from trainer.state import Progress, StateStore
from trainer.vocabulary import STAGE_BY_ID, follow_up_stages

if TYPE_CHECKING:
    from trainer.checking.report import CheckReport, StageResult


@dataclass(frozen=True)
class FollowUpStatus:
    """Where a learner stands with an exercise's follow-ups."""

    active: FollowUp | None  # taken up with `trainer followup`, graded by every check
    passed: tuple[str, ...]  # ids, in the spec's order
    total: int

    @property
    def tally(self) -> str | None:
        """How many are passed of how many ("1/2", as `trainer list` shows it); None for
        an exercise without follow-ups."""
        return f"{len(self.passed)}/{self.total}" if self.total else None

    @property
    def all_passed(self) -> bool:
        return bool(self.total) and len(self.passed) == self.total


def status(exercise: Exercise, progress: Progress) -> FollowUpStatus:
    ids = [f.id for f in exercise.follow_ups]
    active = next((f for f in exercise.follow_ups if f.id == progress.follow_up), None)
    passed = tuple(i for i in ids if i in progress.follow_ups_passed)
    return FollowUpStatus(active, passed, len(ids))


def next_follow_up(exercise: Exercise, progress: Progress) -> FollowUp | None:
    """The follow-up to ask now: the one taken up and not passed, else the first not
    passed; None when every one is passed (or there are none)."""
    for follow_up in exercise.follow_ups:
        if follow_up.id == progress.follow_up and follow_up.id not in progress.follow_ups_passed:
            return follow_up
    return next((f for f in exercise.follow_ups if f.id not in progress.follow_ups_passed), None)


def take_up(store: StateStore, exercise: Exercise, follow_up: FollowUp) -> None:
    """From now on, every check of ``exercise`` grades ``follow_up`` too."""
    with store.update() as state:
        state.progress(exercise.id).follow_up = follow_up.id


@dataclass(frozen=True)
class Question:
    """What `followup` asks: the next follow-up and its place, or None when none is left."""

    follow_up: FollowUp | None
    number: int  # from 1, among the exercise's follow-ups; 0 when there is none
    passed: int  # follow-ups passed so far


def ask_next(store: StateStore, exercise: Exercise) -> Question:
    """The next follow-up of ``exercise`` (:func:`next_follow_up`), taken up."""
    progress = store.load().progress(exercise.id)
    passed = len(status(exercise, progress).passed)
    follow_up = next_follow_up(exercise, progress)
    if follow_up is None:
        return Question(None, 0, passed)
    take_up(store, exercise, follow_up)
    return Question(follow_up, exercise.follow_ups.index(follow_up) + 1, passed)


def stage_title(follow_up: FollowUp) -> str:
    """The stage that grades ``follow_up`` as a check names it: "Follow-up: speed"."""
    return " and ".join(STAGE_BY_ID[s].title for s in follow_up_stages(follow_up.check))


def checked_exercise(
    exercise: Exercise,
    progress: Progress,
    *,
    interviewing: bool = False,
    interview_follow_up: str | None = None,
) -> Exercise:
    """The exercise as a check sends it: with the follow-up taken up active. During an
    interview on it (``interviewing``) the interview's own follow-up instead
    (``interview_follow_up``): none before its pass, the one it asked after."""
    graded = interview_follow_up if interviewing else progress.follow_up
    if graded is None or graded not in {f.id for f in exercise.follow_ups}:
        return exercise
    return exercise.with_follow_up(graded)


def record(store: StateStore, exercise: Exercise, passed: bool) -> str | None:
    """A check of ``exercise`` (with its follow-up active) passed or not: the follow-up
    it passed, recorded, or None."""
    active = exercise.active_follow_up
    if not passed or active is None:
        return None
    with store.update() as state:
        progress = state.progress(exercise.id)
        if active not in progress.follow_ups_passed:
            progress.follow_ups_passed.append(active)
    return active


@dataclass(frozen=True)
class FollowUpCheck:
    """What a check says of an exercise's follow-ups: the one it graded, with its stages
    and whether it passed, how many are left, and the one an interview just asked."""

    exercise: str
    graded: FollowUp | None  # the follow-up taken up, which this check graded
    stages: tuple[StageResult, ...]  # the graded follow-up's stages in the report
    passed: bool  # the graded follow-up passed (the whole check passed with it)
    left: int  # follow-ups not passed yet, this check counted
    waiting: bool  # the check passed and a follow-up is left to ask (`trainer followup`)
    asked: FollowUp | None = None  # asked just now by the interview under way
    asked_number: int = 0  # its place among the exercise's follow-ups, from 1

    def to_dict(self) -> dict[str, object]:
        return {
            "id": self.graded.id if self.graded is not None else None,
            "stages": [s.id for s in self.stages],
            "passed": self.passed,
            "left": self.left,
            "asked": self.asked.id if self.asked is not None else None,
        }


def after_check(
    checked: Exercise,
    report: CheckReport,
    progress: Progress,
    asked: str | None = None,
) -> FollowUpCheck | None:
    """The follow-ups after a check of ``checked`` (the exercise as the check sent it,
    its follow-up active) recorded in ``progress``; ``asked``: the follow-up an interview
    asked after this check. None for an exercise without follow-ups."""
    if not checked.follow_ups:
        return None
    graded = checked.follow_up
    graded_stages = follow_up_stages(graded.check) if graded is not None else ()
    stages = tuple(s for s in report.stages if s.id in graded_stages)
    left = len(checked.follow_ups) - len(status(checked, progress).passed)
    ids = [f.id for f in checked.follow_ups]
    question = checked.follow_ups[ids.index(asked)] if asked in ids else None
    number = ids.index(question.id) + 1 if question is not None else 0
    return FollowUpCheck(
        exercise=checked.id,
        graded=graded,
        stages=stages,
        passed=graded is not None and report.passed,
        left=left,
        waiting=report.passed and left > 0 and question is None,
        asked=question,
        asked_number=number,
    )
