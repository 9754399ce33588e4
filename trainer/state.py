"""Progress kept in one JSON file in the workspace.

Writes are atomic (a temporary file, then ``os.replace``) and serialised with a
lock file, so two commands at once never corrupt it. A file that cannot be read
is moved aside with a notice and a fresh state begins: progress is never worth
a crash.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from trainer.files import write_atomically

STATE_FILE = ".trainer-state.json"
LOCK_FILE = ".trainer-state.lock"
STATE_VERSION = 1


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


@dataclass
class Interview:
    """A timed interview under way."""

    exercise: str
    started_at: float  # seconds since the epoch
    minutes: float
    checks: int = 0
    hints_at_start: int = 0


@dataclass
class State:
    current: str | None = None
    exercises: dict[str, Progress] = field(default_factory=dict)
    interview: Interview | None = None

    def progress(self, exercise_id: str) -> Progress:
        return self.exercises.setdefault(exercise_id, Progress())

    def to_json(self) -> str:
        data = {
            "version": STATE_VERSION,
            "current": self.current,
            "exercises": {k: asdict(v) for k, v in sorted(self.exercises.items())},
            "interview": asdict(self.interview) if self.interview else None,
        }
        return json.dumps(data, indent=2) + "\n"


def _progress_from(data: Any) -> Progress:
    if not isinstance(data, dict):
        raise ValueError("exercise entry is not an object")
    known = Progress.__dataclass_fields__
    values = {k: v for k, v in data.items() if k in known}
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
    return State(
        current=current,
        exercises={str(k): _progress_from(v) for k, v in exercises.items()},
        interview=interview,
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
