"""Forty days of a learner's study, on a fake clock (issue 32).

A plan of 60 days at an hour a day; a new exercise every other day (the one
`trainer next` starts, after some failed checks with diagnoses); reviews as they
come due, one in three of them failed first; two interviews, one passed and one
out of time; a rest day each week. Checks are recorded as `trainer check` records
them (:func:`trainer.interview.record_check` with the report's diagnosis), so no
torch is needed: the recording of a real check is tested in tests/test_stats.py.

``python -m tests.study_history WORKSPACE`` writes it into WORKSPACE ending today,
for the README's captured output.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

from tests.conftest import CATALOG, run_cli
from trainer import interview
from trainer.review import agenda, start_review
from trainer.state import StateStore
from trainer.workspace import Workspace

DAY = 86400.0
DAYS = 40
MISTAKES = ("no_grad_output", "sign_flipped", "no_grad_output", "stage:load", "transposed")


def build(workspace: Path, set_clock: Callable[[float], None], start: float) -> None:
    """The forty days, the first at ``start``; ``set_clock`` moves the fake clock."""
    set_clock(start)
    assert run_cli("plan", "--days", "60", "--hours-per-day", "1").exit_code == 0
    store = StateStore(workspace)
    new = 0
    for day in range(DAYS):
        now = start + day * DAY
        set_clock(now)
        if day % 7 == 6:
            continue  # a rest day
        for due in agenda(store.load(), CATALOG.all, now=now).exercises[:3]:
            exercise = due.exercise
            start_review(Workspace(workspace), store, exercise)
            clean = day % 3 != 0
            interview.record_check(store, exercise.id, clean, None, reviewing=True)
            if not clean:
                interview.record_check(store, exercise.id, True, None, reviewing=True)
        if day % 2 == 0:
            assert run_cli("next").exit_code == 0
            current = store.load().current
            assert current is not None
            for attempt in range(new % 4):
                set_clock(now + 600 * (attempt + 1))
                diagnosis = MISTAKES[(new + attempt) % len(MISTAKES)]
                interview.record_check(store, current, False, diagnosis)
            set_clock(now + 3000 + 300 * new)
            interview.record_check(store, current, True, None)
            new += 1
        if day in (12, 29):
            set_clock(now + 4 * 3600)
            exercise = CATALOG.get("linear" if day == 12 else "layer_norm")
            interview.begin(store, exercise, 40.0)
            set_clock(now + 4 * 3600 + 600)
            interview.record_check(store, exercise.id, False, "transposed")
            if day == 12:
                set_clock(now + 4 * 3600 + 1500)
                interview.record_check(store, exercise.id, True, None)
            else:
                set_clock(now + 4 * 3600 + 41 * 60)
                interview.expire_if_due(store)
    set_clock(start + DAYS * DAY)


def main() -> None:
    import os

    import trainer.history
    import trainer.interview

    workspace = Path(sys.argv[1]).resolve()
    os.environ["TRAINER_WORKSPACE"] = str(workspace)
    now = [0.0]

    def set_clock(moment: float) -> None:
        now[0] = moment

    trainer.history.CLOCK = lambda: now[0]
    trainer.interview.CLOCK = lambda: now[0]
    build(workspace, set_clock, time.time() - DAYS * DAY - 3600)


if __name__ == "__main__":
    main()
