"""Double backward: second derivatives through the learner's backward against finite differences of its first."""

from __future__ import annotations

import torch

from trainer.checking import protocol
from trainer.checking.trusted.compare import compare_tensor
from trainer.checking.trusted.numeric import central_differences
from trainer.checking.trusted.plan import Run
from trainer.checking.trusted.proxy import LearnerFault
from trainer.checking.trusted.stages import (
    Checked,
    Failure,
    StageOutcome,
    fault_diagnosis,
    learner_gradients,
    summarise,
)


def double_backward_stage(checked: Checked) -> StageOutcome:
    """Second derivatives: finite differences of the learner's own first-order backward."""
    failures: list[Failure] = []
    runs = checked.plan.gradcheck_runs[:2]
    for run in runs:
        try:
            failure = _double_backward_failure(checked, run)
        except LearnerFault as fault:
            failure = Failure(run, fault.message, fault.details, fault_diagnosis(fault))
        if failure is not None:
            failures.append(failure)
    return summarise(
        failures,
        len(runs),
        f"second derivatives through your backward agree with finite differences on {len(runs)} runs",
    )


def _double_backward_failure(checked: Checked, run: Run) -> Failure | None:
    sandbox, exercise = checked.sandbox, checked.exercise
    names = run.grad_names()
    flags = [p.name in names for p in run.params]
    args = run.fresh_args()
    # Its own seeded draw: the global generator's state is whatever the server's earlier
    # work left, and a report must read the same each time it is made.
    generator = torch.Generator().manual_seed(12)
    vector = tuple(
        torch.randn(run.expected_grads[n].shape, dtype=torch.float64, generator=generator).to(
            run.expected_grads[n].dtype
        )
        for n in names
    )
    analytical = sandbox.answer(
        protocol.Double(
            args=list(args), requires_grad=flags, upstream=list(run.upstream), vector=list(vector)
        )
    ).second
    if not isinstance(analytical, list | tuple):
        return Failure(run, "the second-order gradients could not be read")
    eps = checked.exercise.tolerances.gradcheck_eps
    positions = [i for i, p in enumerate(run.params) if p.name in names]

    def first_order_dot(shifted: list[object]) -> float:
        grads = learner_gradients(checked.function_class, run, exercise, args=shifted)
        if isinstance(grads, Failure):
            raise LearnerFault(grads.message, grads.details)
        return float(
            sum((g * v).sum() for g, v in zip(grads.values(), vector, strict=True) if g is not None)
        )

    for slot, position in enumerate(positions):
        base = args[position]
        assert isinstance(base, torch.Tensor)

        def dot_at(moved: torch.Tensor, position: int = position) -> torch.Tensor:
            shifted = [a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args]
            shifted[position] = moved
            return torch.tensor(first_order_dot(shifted), dtype=torch.float64)

        numerical = central_differences(dot_at, base, eps).reshape(-1)
        got = analytical[slot] if slot < len(analytical) else None
        if not isinstance(got, torch.Tensor):
            got = torch.zeros_like(base)
        mismatch = compare_tensor(
            f"second derivative for `{run.params[position].name}`",
            numerical.reshape(base.shape),
            got.to(base.dtype),
            type(run.tolerance)(rtol=1e-3, atol=1e-5),
        )
        if mismatch:
            return Failure(
                run,
                f"{mismatch.summary}: is your backward built from differentiable torch ops?",
                [mismatch.detail],
            )
    return None
