"""CUDA: forward and backward on the GPU against the CPU reference (skipped without one)."""

from __future__ import annotations

import torch

from trainer.checking.trusted.compare import compare_tensor
from trainer.checking.trusted.stages import (
    SKIP,
    Checked,
    Failure,
    StageOutcome,
    learner_gradients,
    summarise,
)


def cuda_stage(checked: Checked) -> StageOutcome:
    if not torch.cuda.is_available():
        return StageOutcome(SKIP, "skipped: no GPU (torch.cuda.is_available() is False)")
    sandbox = checked.sandbox
    sandbox.device = "cuda"
    try:
        failures: list[Failure] = []
        for run in checked.plan.runs:
            grads = learner_gradients(checked.function_class, run, checked.exercise)
            if isinstance(grads, Failure):
                failures.append(grads)
                continue
            for name, got in grads.items():
                if got is None:
                    continue
                mismatch = compare_tensor(
                    f"grad for `{name}` on the GPU", run.expected_grads[name], got, run.tolerance
                )
                if mismatch:
                    failures.append(Failure(run, mismatch.summary, [mismatch.detail]))
                    break
    finally:
        sandbox.device = "cpu"
    return summarise(
        failures, len(checked.plan.runs), "forward and backward on the GPU match the CPU reference"
    )
