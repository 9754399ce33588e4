"""Progress kept in one JSON file in the workspace.

Writes are atomic (a temporary file, then ``os.replace``) and serialised with a
lock file, so two commands at once never corrupt it. A file that cannot be read
is moved aside with a notice and a fresh state begins: progress is never worth
a crash.

The file stays readable by the version before the study record (issue 32): the
record is new fields (of an exercise, and at the top), which that version ignores,
and ``version`` stays 1. A new field of the wrong type is dropped here, not taken
for damage: a later version may shape it otherwise. Every record is bounded
(:data:`MAX_DAYS`, :data:`MAX_INTERVIEWS`, :data:`MAX_QUIZ_REVIEWS`, one count per
diagnosis), so the file stays small however long it is used.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from trainer.files import write_atomically

STATE_FILE = ".trainer-state.json"
LOCK_FILE = ".trainer-state.lock"
STATE_VERSION = 1
MAX_DAYS = 400  # days of check counts kept (the newest)
MAX_INTERVIEWS = 100  # finished interviews kept (the newest)
MAX_QUIZ_REVIEWS = 500  # quiz questions waiting for review
MAX_DIAGNOSES = 64  # distinct diagnoses counted per exercise


@dataclass
class Progress:
    started: bool = False
    passed: bool = False
    checks: int = 0
    hints_shown: int = 0
    quiz_best: int | None = None
    quiz_total: int | None = None
    solution_seen: bool = False
    # The best finished interview on this exercise (see trainer.interview).
    best_interview: dict[str, Any] | None = None
    # The study record (trainer.history, trainer.review); unknown to older versions.
    started_at: float | None = None  # the first start or check (seconds since the epoch)
    passed_at: float | None = None  # the first pass
    checks_to_pass: int | None = None  # the checks up to the first pass, it included
    hints_to_pass: int | None = None  # the hints seen by the first pass
    diagnoses: dict[str, int] = field(default_factory=dict)  # failed checks per diagnosis
    review: dict[str, Any] | None = None  # the spaced-review schedule (trainer.review)
    # The gradient on the whiteboard (trainer.derive): sessions finished, and whether
    # one of them had every formula right.
    derive_attempts: int = 0
    derive_passed: bool = False
    # The interviewer's follow-ups (trainer.follow_ups): the one taken up, those passed.
    follow_up: str | None = None
    follow_ups_passed: list[str] = field(default_factory=list)


@dataclass
class Interview:
    """A timed interview under way."""

    exercise: str
    started_at: float  # seconds since the epoch
    minutes: float
    checks: int = 0
    hints_at_start: int = 0
    # After the pass, the follow-up the interviewer asked (trainer.interview), and when
    # the pass came, in seconds from the start; unknown to older versions.
    follow_up: str | None = None
    passed_after: float | None = None


@dataclass
class State:
    current: str | None = None
    exercises: dict[str, Progress] = field(default_factory=dict)
    interview: Interview | None = None
    # The study record; unknown to older versions.
    days: dict[str, int] = field(default_factory=dict)  # checks per local date, YYYY-MM-DD
    interviews: list[dict[str, Any]] = field(default_factory=list)  # finished, oldest first
    quiz_reviews: dict[str, dict[str, Any]] = field(default_factory=dict)  # see trainer.review
    plan: dict[str, Any] | None = None  # the study plan (trainer.study_plan)

    def progress(self, exercise_id: str) -> Progress:
        return self.exercises.setdefault(exercise_id, Progress())

    def to_json(self) -> str:
        data = {
            "version": STATE_VERSION,
            "current": self.current,
            "exercises": {k: asdict(v) for k, v in sorted(self.exercises.items())},
            "interview": asdict(self.interview) if self.interview else None,
            "days": dict(sorted(self.days.items())[-MAX_DAYS:]),
            "interviews": self.interviews[-MAX_INTERVIEWS:],
            "quiz_reviews": dict(list(self.quiz_reviews.items())[-MAX_QUIZ_REVIEWS:]),
            "plan": self.plan,
        }
        return json.dumps(data, indent=2) + "\n"


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_time(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_counts(value: object) -> bool:
    return isinstance(value, dict) and all(
        isinstance(k, str) and _is_count(n) for k, n in value.items()
    )


def _is_object(value: object) -> bool:
    return isinstance(value, dict)


def _is_bool(value: object) -> bool:
    return isinstance(value, bool)


# The study record's fields, each with what a usable value is: one that is not is
# dropped (the field takes its default), never read as damage.
_RECORD_FIELDS: dict[str, Callable[[object], bool]] = {
    "started_at": _is_time,
    "passed_at": _is_time,
    "checks_to_pass": _is_count,
    "hints_to_pass": _is_count,
    "diagnoses": _is_counts,
    "review": _is_object,
    "derive_attempts": _is_count,
    "derive_passed": _is_bool,
    "follow_up": lambda value: isinstance(value, str),
    "follow_ups_passed": lambda value: (
        isinstance(value, list) and all(isinstance(v, str) for v in value)
    ),
}


def _progress_from(data: Any) -> Progress:
    if not isinstance(data, dict):
        raise ValueError("exercise entry is not an object")
    known = Progress.__dataclass_fields__
    values: dict[str, Any] = {}
    for key, value in data.items():
        usable = _RECORD_FIELDS.get(str(key))
        if key in known and (usable is None or usable(value)):
            values[key] = value
    if "diagnoses" in values:
        values["diagnoses"] = dict(list(values["diagnoses"].items())[:MAX_DIAGNOSES])
    progress = Progress(**values)
    for name in ("started", "passed", "solution_seen"):
        if not isinstance(getattr(progress, name), bool):
            raise ValueError(f"{name} is not true/false")
    for name in ("checks", "hints_shown"):
        value = getattr(progress, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} is not a count")
    return progress


def parse_state(text: str) -> State:
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    version = data.get("version")
    if version != STATE_VERSION:
        raise ValueError(f"unknown version {version!r}")
    current = data.get("current")
    if current is not None and not isinstance(current, str):
        raise ValueError("current is not text")
    exercises = data.get("exercises", {})
    if not isinstance(exercises, dict):
        raise ValueError("exercises is not an object")
    raw_interview = data.get("interview")
    interview = None
    if raw_interview is not None:
        if not isinstance(raw_interview, dict):
            raise ValueError("interview is not an object")
        known = Interview.__dataclass_fields__
        interview = Interview(**{k: v for k, v in raw_interview.items() if k in known})
        if not isinstance(interview.exercise, str) or not isinstance(
            interview.started_at, int | float
        ):
            raise ValueError("interview is incomplete")
        if not isinstance(interview.follow_up, str) or not _is_time(interview.passed_after):
            interview.follow_up, interview.passed_after = None, None
    days = data.get("days")
    interviews = data.get("interviews")
    quiz_reviews = data.get("quiz_reviews")
    plan = data.get("plan")
    return State(
        current=current,
        exercises={str(k): _progress_from(v) for k, v in exercises.items()},
        interview=interview,
        days={k: n for k, n in days.items() if isinstance(k, str) and _is_count(n)}
        if isinstance(days, dict)
        else {},
        interviews=[i for i in interviews if isinstance(i, dict)][-MAX_INTERVIEWS:]
        if isinstance(interviews, list)
        else [],
        quiz_reviews={k: v for k, v in quiz_reviews.items() if isinstance(v, dict)}
        if isinstance(quiz_reviews, dict)
        else {},
        plan=plan if isinstance(plan, dict) else None,
    )


class StateStore:
    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self.path = workspace / STATE_FILE
        self.notices: list[str] = []

    def load(self) -> State:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return State()
        except (OSError, UnicodeDecodeError) as error:
            return self._start_over(f"cannot be read ({error})")
        try:
            return parse_state(text)
        except (ValueError, TypeError) as error:
            return self._start_over(f"is damaged ({error})")

    def _start_over(self, why: str) -> State:
        aside = self.path.with_name(f"{STATE_FILE}.broken-{time.strftime('%Y%m%d-%H%M%S')}")
        try:
            os.replace(self.path, aside)
            kept = f"it was moved to {aside.name}"
        except OSError:
            kept = "it could not be moved aside"
        self.notices.append(
            f"Your progress file {self.path.name} {why}; {kept} and progress starts afresh. "
            "Your scratch files are untouched."
        )
        return State()

    def save(self, state: State) -> None:
        write_atomically(self.path, state.to_json())

    @contextlib.contextmanager
    def update(self) -> Iterator[State]:
        """Load, let the caller change, and save, holding a lock against other commands."""
        with open(self.workspace / LOCK_FILE, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                state = self.load()
                yield state
                self.save(state)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
