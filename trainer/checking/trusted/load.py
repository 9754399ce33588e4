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
    problem = checked.sandbox.load().problem
    if problem is not None:
        return StageOutcome(FAIL, problem.message, problem.details)
    name = checked.exercise.class_name
    if checked.exercise.form == "custom_op":
        return StageOutcome(PASS, f"`{name}` found: a custom op with its gradient registered")
    return StageOutcome(PASS, f"`{name}` found with static forward and backward")
