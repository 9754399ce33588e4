"""The second-derivatives stage: the learner's backward differentiated once more, against
the reference's, with respect to the inputs *and* grad_output.

torch's ``gradgradcheck`` cannot run on the checker's proxy (its backward asks
another process, so autograd cannot see through it). The learner's process
builds ``<grads, v>`` with ``create_graph=True`` and differentiates it again
with respect to every input that requires grad and every upstream gradient,
as gradgradcheck does; here the same comes from autograd of the reference
expression, exactly. The ``double_backward`` stage after this one compares the
same second derivatives with finite differences of the learner's own backward.
"""

from __future__ import annotations

import torch

from trainer.checking import protocol
from trainer.checking.trusted.compare import compare_tensor
from trainer.checking.trusted.function_api import decoded_list, float64_runs, mistake
from trainer.checking.trusted.plan import Run, differentiable, evaluate_reference
from trainer.checking.trusted.proxy import LearnerFault
from trainer.checking.trusted.stages import Checked, Failure, StageOutcome, summarise
from trainer.checking.vjp import vector_jacobian
from trainer.spec import Exercise

_NOT_DIFFERENTIABLE = (
    "backward cannot be differentiated: autograd needs its ops recorded (no "
    "@once_differentiable, no in-place change of a tensor autograd saved, no numpy)"
)


def _reference_second(
    exercise: Exercise, run: Run, vector: list[torch.Tensor]
) -> list[torch.Tensor]:
    names = run.grad_names()
    live = [
        a.detach().clone().requires_grad_(p.name in names) if isinstance(a, torch.Tensor) else a
        for a, p in zip(run.args, run.params, strict=True)
    ]
    leaves = [
        a
        for a, p in zip(live, run.params, strict=True)
        if isinstance(a, torch.Tensor) and p.name in names
    ]
    outputs = evaluate_reference(exercise, live)
    upstream = [u.detach().clone().requires_grad_(u.is_floating_point()) for u in run.upstream]
    floats, weights = differentiable(outputs, upstream)
    grads = vector_jacobian(floats, leaves, weights, create_graph=True, allow_unused=True)
    total = torch.stack(
        [(g * v).sum() for g, v in zip(grads, vector, strict=True) if g is not None]
    ).sum()
    targets = [*leaves, *[w for w in weights if isinstance(w, torch.Tensor)]]
    second = torch.autograd.grad(total, targets, allow_unused=True)
    return [
        (s if s is not None else torch.zeros_like(t)).detach()
        for s, t in zip(second, targets, strict=True)
    ]


def _second_failure(checked: Checked, run: Run) -> Failure | None:
    exercise = checked.exercise
    names = run.grad_names()
    generator = torch.Generator().manual_seed(11)
    vector = [
        torch.randn(run.expected_grads[n].shape, dtype=torch.float64, generator=generator).to(
            run.expected_grads[n].dtype
        )
        for n in names
    ]
    request = protocol.SecondOrder(
        args=list(run.args),
        requires_grad=[p.name in names for p in run.params],
        upstream=list(run.upstream),
        vector=vector,
    )
    try:
        reply = checked.sandbox.answer(request)
    except LearnerFault as fault:
        text = f"{fault.message}: {_NOT_DIFFERENTIABLE}"
        return Failure(run, text, fault.details, mistake("not_differentiable_backward", text))
    got = decoded_list(reply.second, "second")
    expected = _reference_second(exercise, run, vector)
    floats = [i for i, o in enumerate(run.expected_outputs) if o.is_floating_point()]
    targets = [f"`{n}`" for n in names] + [
        "grad_output" if exercise.outputs == 1 else f"grad_out{i + 1}" for i in floats
    ]
    if reply.detached:
        text = (
            "backward's result does not require grad even under create_graph=True: it is "
            "computed outside autograd (torch.no_grad, .detach(), .data), so its second "
            "derivatives are lost"
        )
        return Failure(run, text, diagnosis=mistake("second_order_wrong", text))
    for index, (target, want) in enumerate(zip(targets, expected, strict=True)):
        have = got[index] if index < len(got) else None
        if have is None:
            have = torch.zeros_like(want)
        mismatch = compare_tensor(
            f"the second derivative with respect to {target}", want, have, run.tolerance
        )
        if not mismatch:
            continue
        if index >= len(names):
            text = (
                f"{mismatch.summary}: backward's result must be a differentiable function of "
                f"{target} (no .detach(), .data or no_grad on it); gradient penalties and "
                "Hessian-vector products differentiate through it"
            )
            kind = "grad_output_detached"
        else:
            text = (
                f"{mismatch.summary}: does backward use a tensor forward computed and saved? "
                "To autograd it is a constant in backward; recompute it in backward from the "
                "saved inputs or outputs (an output of this Function is differentiated again "
                "through your backward)"
            )
            kind = "second_order_wrong"
        return Failure(run, text, [mismatch.detail] if mismatch.detail else [], mistake(kind, text))
    return None


def second_order_stage(checked: Checked) -> StageOutcome:
    runs = float64_runs(checked)
    failures = [f for f in (_second_failure(checked, run) for run in runs) if f is not None]
    return summarise(
        failures,
        len(runs),
        f"backward differentiated again (create_graph=True) matches the reference's second "
        f"derivatives with respect to the inputs and grad_output on {len(runs)} runs",
    )
