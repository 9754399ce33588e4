"""Forward parity: the learner's forward against the spec's reference, every case, both dtypes."""

from __future__ import annotations

import torch

from trainer.checking.trusted.compare import compare_tensor
from trainer.checking.trusted.plan import Run
from trainer.checking.trusted.proxy import LearnerFault, forward_outputs
from trainer.checking.trusted.stages import (
    Checked,
    Failure,
    StageOutcome,
    _lines,
    apply,
    fault_diagnosis,
    mark_output,
    output_name,
    summarise,
)
from trainer.spec import Exercise


def call_forward(
    function_class: type[torch.autograd.Function], run: Run, exercise: Exercise
) -> tuple[list[object], tuple[torch.Tensor, ...]] | Failure:
    mark_output(run)
    args = run.fresh_args()
    try:
        outputs = forward_outputs(apply(function_class, args), exercise)
    except LearnerFault as fault:  # the proxy's forward refuses what torch would
        return Failure(run, fault.message, fault.details, fault_diagnosis(fault))
    return args, outputs


def forward_stage(checked: Checked) -> StageOutcome:
    function_class, plan, exercise = checked.function_class, checked.plan, checked.exercise
    failures: list[Failure] = []
    for run in plan.runs:
        called = call_forward(function_class, run, exercise)
        if isinstance(called, Failure):
            failures.append(called)
            continue
        for index, (expected, got) in enumerate(zip(run.expected_outputs, called[1], strict=True)):
            slack = run.outputs_slack[index] if run.outputs_slack else None
            mismatch = compare_tensor(
                output_name(exercise, index), expected, got, run.tolerance, slack
            )
            if mismatch:
                failures.append(
                    Failure(
                        run, mismatch.summary, _lines(mismatch.detail), severity=mismatch.severity
                    )
                )
                break
    # The most wrong first (run order among equals): a float64 rounding error in the
    # first run must not hide an error of 3.0 (an ignored mask) in a later one.
    failures.sort(key=lambda f: -f.severity)
    return summarise(
        failures,
        len(plan.runs),
        f"matches `{exercise.reference}` on {len(plan.runs)} runs (float32 and float64)",
    )
