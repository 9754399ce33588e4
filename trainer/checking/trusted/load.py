"""The load stage: the file imports, and its class has the structure autograd needs."""

from __future__ import annotations

from trainer.checking.trusted.stages import (
    FAIL,
    PASS,
    Checked,
    StageOutcome,
)


def load_stage(checked: Checked) -> StageOutcome:
    return _load(checked)


def _load(checked: Checked) -> StageOutcome:
    reply = checked.sandbox.load()
    problem = reply.get("problem")
    if isinstance(problem, dict):
        details = problem.get("details", [])
        return StageOutcome(
            FAIL,
            str(problem.get("message", "the file did not load")),
            [str(d) for d in details] if isinstance(details, list) else [],
        )
    name = checked.exercise.class_name
    return StageOutcome(PASS, f"`{name}` found with static forward and backward")
