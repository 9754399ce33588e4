"""Where the learner stands, as data: what `trainer stats` and `%trainer stats` show.

Everything comes from the progress file (:mod:`trainer.state`, recorded by
:mod:`trainer.history`) and the catalogue; nothing here prints.

A *weak spot* is a diagnosis of failed checks counted across exercises, with
what practises it: a question of the concepts quiz that asks about it (found by
words of its text, so a renumbered quiz still points right) and an exercise
whose known-wrong solutions make that mistake (one not passed yet, when there is).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta

from trainer import history
from trainer.catalog import track_rank
from trainer.history import STAGE_PREFIX, date_of
from trainer.spec import OTHER_TRACK, TRACKS, Exercise, SharedQuiz
from trainer.state import State
from trainer.vocabulary import MISTAKES, STAGE_BY_ID

CHART_DAYS = 28  # the days the checks-per-day chart covers, today included
WEAK_SPOTS_SHOWN = 5

# Diagnosis -> words of the concepts-quiz question that practises it.
CONCEPT_QUESTIONS = {
    "no_grad_output": "forgets grad_output",
    "scales_grad_output": "What does `MySigmoid.backward` receive as `grad_output`",
    "wrong_count": "What must backward return?",
    "wrong_shape": "What must backward return?",
    "grad_for_non_tensor": "in alpha's position",
    "none_for_required": "What must backward return?",
    "state_outside_ctx": "How should forward keep them?",
    "in_place_grad_output": "grad_output.mul_(slope)",
    "kink_value": "has slope −1 left of 0",
    "near_kink": "has slope −1 left of 0",
    "not_summed_over_batch": "A value is read several times in forward",
    "jacobian_diagonal_only": "keeps only the diagonal of the Jacobian",
    "missing_upstream": "the loss uses only the first",
    "ignores_an_upstream": "the loss uses only the first",
    "constant_factor": "By what number does each divide in its gradient?",
    "wrong_dtype": "in float64 and not in float32",
}


@dataclass(frozen=True)
class TrackCompletion:
    title: str
    passed: int
    total: int


@dataclass(frozen=True)
class WeakSpot:
    diagnosis: str  # a mistake id, or stage:<id>
    words: str
    times: int
    exercises: int
    exercise: str | None  # an exercise that practises it
    question: int | None  # the number of a concepts-quiz question about it


@dataclass(frozen=True)
class InterviewResult:
    day: str  # YYYY-MM-DD
    exercise: str
    passed: bool
    seconds: float
    minutes: float
    reason: str = "passed"  # "passed", "stopped" or "time up"
    follow_up: str | None = None  # the follow-up asked after the pass
    follow_up_answered: bool = False


@dataclass
class Stats:
    tracks: list[TrackCompletion]
    passed: int
    total: int
    streak: int  # days in a row with a check, ending today or yesterday
    longest_streak: int
    checks_per_pass: float | None
    hints_per_pass: float | None
    times: list[tuple[str, float]]  # (exercise, seconds from first start to first pass)
    interviews: list[InterviewResult]
    weak_spots: list[WeakSpot]
    reviews_clean: int
    reviews_failed: int
    days: list[tuple[str, int]] = field(default_factory=list)  # the chart: (date, checks)
    # The gradient on the whiteboard (trainer derive): exercises derived, of those tried.
    derived: int = 0
    derive_tried: int = 0

    @property
    def median_time(self) -> float | None:
        return statistics.median(s for _, s in self.times) if self.times else None

    @property
    def empty(self) -> bool:
        """Nothing recorded yet: no check in the chart's days and nothing passed."""
        return not self.passed and not any(n for _, n in self.days)


def _streaks(days: Sequence[str], today: date) -> tuple[int, int]:
    active = sorted({date.fromisoformat(d) for d in days})
    longest = run = 0
    previous: date | None = None
    for day in active:
        run = run + 1 if previous is not None and day - previous == timedelta(days=1) else 1
        longest = max(longest, run)
        previous = day
    current = 0
    if active and today - active[-1] <= timedelta(days=1):
        current = run
    return current, longest


def diagnosis_words(diagnosis: str, exercises: Sequence[Exercise]) -> str:
    """What a diagnosis says, in the checker's words (up to their first colon)."""
    return _diagnosis_words(diagnosis, exercises).split(": ")[0]


def _diagnosis_words(diagnosis: str, exercises: Sequence[Exercise]) -> str:
    if diagnosis.startswith(STAGE_PREFIX):
        stage = STAGE_BY_ID.get(diagnosis[len(STAGE_PREFIX) :])
        title = stage.title if stage is not None else diagnosis[len(STAGE_PREFIX) :]
        return f"failed at {title} (no classic mistake named)"
    if diagnosis in MISTAKES:
        return MISTAKES[diagnosis]
    for exercise in exercises:
        declared = exercise.mistakes.get(diagnosis)
        if declared is not None:
            return declared.words
    return diagnosis.replace("_", " ")


def _practice(
    diagnosis: str, exercises: Sequence[Exercise], state: State, concepts: SharedQuiz | None
) -> tuple[str | None, int | None]:
    makers = [
        e
        for e in exercises
        if any(v.mistake == diagnosis for v in e.wrong_variants) or diagnosis in e.mistakes
    ]
    fresh = [e for e in makers if not (e.id in state.exercises and state.exercises[e.id].passed)]
    chosen = fresh or makers
    question = None
    words = CONCEPT_QUESTIONS.get(diagnosis)
    if concepts is not None and words is not None:
        for number, asked in enumerate(concepts.quiz, start=1):
            if words in asked.question:
                question = number
                break
    return (chosen[0].id if chosen else None), question


def compute(
    state: State,
    exercises: Sequence[Exercise],
    concepts: SharedQuiz | None = None,
    now: float | None = None,
) -> Stats:
    """The learner's statistics at ``now``."""
    now = history.CLOCK() if now is None else now
    today = date.fromisoformat(date_of(now))
    counts: dict[str, list[int]] = {}
    for exercise in sorted(exercises, key=track_rank):
        title = TRACKS.get(exercise.track or "", OTHER_TRACK)
        entry = counts.setdefault(title, [0, 0])
        progress = state.exercises.get(exercise.id)
        entry[0] += progress is not None and progress.passed
        entry[1] += 1
    tracks = [TrackCompletion(title, p, t) for title, (p, t) in counts.items()]
    known = {e.id for e in exercises}
    passed = [p for i, p in state.exercises.items() if p.passed and i in known]
    # Up to the first pass where it is known (not the checks of reviews after it).
    checks = sum(p.checks if p.checks_to_pass is None else p.checks_to_pass for p in passed)
    hints = sum(p.hints_shown if p.hints_to_pass is None else p.hints_to_pass for p in passed)
    times = sorted(
        (
            (i, p.passed_at - p.started_at)
            for i, p in state.exercises.items()
            if p.passed and p.passed_at is not None and p.started_at is not None
        ),
        key=lambda item: (-item[1], item[0]),
    )
    interviews = [
        InterviewResult(
            day=date_of(float(i.get("at", 0))),
            exercise=str(i.get("exercise", "?")),
            passed=i.get("reason") == "passed",
            seconds=float(i.get("seconds", 0) or 0),
            minutes=float(i.get("minutes", 0) or 0),
            reason=str(i.get("reason", "stopped")),
            follow_up=str(i["follow_up"]) if isinstance(i.get("follow_up"), str) else None,
            follow_up_answered=i.get("follow_up_outcome") == "answered",
        )
        for i in state.interviews
    ]
    totals: dict[str, list[int]] = {}
    for progress in state.exercises.values():
        for diagnosis, times_seen in progress.diagnoses.items():
            entry = totals.setdefault(diagnosis, [0, 0])
            entry[0] += times_seen
            entry[1] += 1
    ranked = sorted(totals.items(), key=lambda item: (-item[1][0], -item[1][1], item[0]))
    weak_spots = []
    for diagnosis, (times_seen, in_exercises) in ranked[:WEAK_SPOTS_SHOWN]:
        practised_by, question = _practice(diagnosis, exercises, state, concepts)
        weak_spots.append(
            WeakSpot(
                diagnosis,
                diagnosis_words(diagnosis, exercises),
                times_seen,
                in_exercises,
                practised_by,
                question,
            )
        )
    reviews = [p.review or {} for p in state.exercises.values()]
    current, longest = _streaks([d for d, n in state.days.items() if n], today)
    chart = [
        ((today - timedelta(days=back)).isoformat(), 0) for back in range(CHART_DAYS - 1, -1, -1)
    ]
    return Stats(
        tracks=tracks,
        passed=len(passed),
        total=len(exercises),
        streak=current,
        longest_streak=longest,
        checks_per_pass=checks / len(passed) if passed else None,
        hints_per_pass=hints / len(passed) if passed else None,
        times=times,
        interviews=interviews,
        weak_spots=weak_spots,
        reviews_clean=sum(int(r.get("clean", 0)) for r in reviews),
        reviews_failed=sum(int(r.get("failed", 0)) for r in reviews),
        days=[(d, state.days.get(d, 0)) for d, _ in chart],
        derived=sum(p.derive_passed for p in state.exercises.values()),
        derive_tried=sum(p.derive_attempts > 0 for p in state.exercises.values()),
    )
