"""The vmap stage: the learner's Function under ``torch.func.vmap`` and ``torch.func.grad``.

A batch is several value sets of one case (the plan's ``state_runs``, whose
reference outputs and gradients are known) stacked along a new dim. The
learner's process runs the Function under ``torch.func.vmap`` with the batch
dim first, then second (``in_dims=1``), then, with several tensor inputs, with
only the first batched (``None`` for the others); then it backpropagates
through the vmapped Function with autograd's engine (the learner's backward
runs under vmap), and last it takes per-sample gradients with
``torch.func.vmap(torch.func.grad(loss))``. That last call imports
``torch._dynamo`` (about 1.5 s of CPU), so it runs only once everything else
agrees.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from trainer.checking import protocol
from trainer.checking.trusted.compare import compare_tensor
from trainer.checking.trusted.function_api import decoded_list, fault_failure, mistake
from trainer.checking.trusted.plan import Run, evaluate_reference
from trainer.checking.trusted.proxy import LearnerFault
from trainer.checking.trusted.stages import Checked, Failure, StageOutcome, output_name, summarise

BATCH = 3


def _stacked(runs: Sequence[Run], index: int, dim: int | None) -> object:
    value = runs[0].args[index]
    if not isinstance(value, torch.Tensor):
        return value
    if dim is None:
        return value
    return torch.stack([r.args[index] for r in runs], dim=0).movedim(0, dim)  # type: ignore[misc]


def _in_dims(run: Run, at: int) -> list[int | None]:
    """The batch dim of every tensor argument at ``at`` (or 0 for a 0-dim sample)."""
    return [(at if a.dim() >= at else 0) if isinstance(a, torch.Tensor) else None for a in run.args]


def _expected(
    checked: Checked, runs: Sequence[Run], dims: Sequence[int | None]
) -> tuple[list[torch.Tensor], dict[str, torch.Tensor]]:
    """Per-sample reference outputs (stacked at dim 0) and gradients (stacked, for a batch
    whose every tensor is batched)."""
    if all(
        d is not None
        for d, a in zip(dims, runs[0].args, strict=True)
        if isinstance(a, torch.Tensor)
    ):
        outputs = [
            torch.stack([r.expected_outputs[k] for r in runs])
            for k in range(len(runs[0].expected_outputs))
        ]
        grads = {n: torch.stack([r.expected_grads[n] for r in runs]) for n in runs[0].grad_names()}
        return outputs, grads
    samples = []
    for run in runs:
        args = [
            r_arg if d is not None else first_arg
            for r_arg, first_arg, d in zip(run.args, runs[0].args, dims, strict=True)
        ]
        with torch.no_grad():
            samples.append(evaluate_reference(checked.exercise, args))
    return [torch.stack([s[k] for s in samples]) for k in range(len(samples[0]))], {}


def _request(runs: Sequence[Run], dims: Sequence[int | None], mode: str) -> protocol.Vmap:
    first = runs[0]
    names = first.grad_names()
    return protocol.Vmap(
        mode=mode,
        args=[_stacked(runs, i, d) for i, d in enumerate(dims)],
        in_dims=list(dims),
        requires_grad=[
            p.name in names and d is not None for p, d in zip(first.params, dims, strict=True)
        ],
        upstream=[torch.stack([r.upstream[k] for r in runs]) for k in range(len(first.upstream))],
    )


def _dims_words(checked: Checked, dims: Sequence[int | None]) -> str:
    shown = [
        f"{p.name}: {d}"
        for p, d, a in zip(
            checked.exercise.parameters, dims, checked.plan.state_runs[0].args, strict=True
        )
        if isinstance(a, torch.Tensor)
    ]
    return "in_dims " + ", ".join(shown)


def _error_failure(run: Run, fault: LearnerFault, words: str) -> Failure:
    text = f"{fault.message}, {words}"
    # The learner's process ran the Function on one sample after vmap failed: it works there.
    kind = "not_batchable" if fault.mistake == "not_batchable" else ""
    return Failure(run, text, fault.details, mistake(kind, text) if kind else None)


def _compare_outputs(
    checked: Checked, run: Run, got: list[Any], want: list[torch.Tensor], words: str
) -> Failure | None:
    if len(got) != len(want):
        return Failure(run, f"{words}, forward returns {len(got)} outputs, expected {len(want)}")
    for index, (expected, found) in enumerate(zip(want, got, strict=True)):
        mismatch = compare_tensor(
            f"{output_name(checked.exercise, index)} of the batch", expected, found, run.tolerance
        )
        if mismatch:
            text = f"{words}, {mismatch.summary}"
            details = [mismatch.detail] if mismatch.detail else []
            details.append("vmap puts the batch dim of every output first (out_dims=0)")
            return Failure(run, text, details, mistake("wrong_under_vmap", text))
    return None


def _compare_grads(
    run: Run, names: list[str], got: list[Any], want: dict[str, torch.Tensor], words: str
) -> Failure | None:
    for name, found in zip(names, got, strict=False):
        mismatch = compare_tensor(f"grad for `{name}`", want[name], found, run.tolerance)
        if mismatch:
            text = f"{words}, {mismatch.summary}"
            return Failure(
                run,
                text,
                [mismatch.detail] if mismatch.detail else [],
                mistake("wrong_under_vmap", text),
            )
    return None


def _vmap_failure(checked: Checked) -> Failure | None:
    runs = list(checked.plan.state_runs[:BATCH])
    first = runs[0]
    name = checked.exercise.class_name
    patterns = [_in_dims(first, 0), _in_dims(first, 1)]
    tensors = [
        i for i, a in enumerate(first.args) if isinstance(a, torch.Tensor) and a.is_floating_point()
    ]
    if len(tensors) > 1:
        patterns.append(
            [
                0 if i == tensors[0] else None if i in tensors else d
                for i, d in enumerate(patterns[0])
            ]
        )
    for number, dims in enumerate(patterns):
        words = f"under torch.func.vmap with {_dims_words(checked, dims)}"
        try:
            reply = checked.sandbox.answer(_request(runs, dims, "forward"))
        except LearnerFault as fault:
            return _error_failure(first, fault, words)
        if number == 0:
            if not reply.has_setup_context:
                text = (
                    "forward takes ctx, so torch.func.vmap cannot use the Function: torch.func "
                    "transforms need forward(*inputs) without ctx and a "
                    "setup_context(ctx, inputs, output) that saves what backward needs"
                )
                return Failure(None, text, diagnosis=mistake("no_setup_context", text))
            if not reply.has_vmap_rule:
                text = (
                    f"`{name}` has neither generate_vmap_rule = True nor a vmap staticmethod, "
                    "so torch.func.vmap cannot batch it"
                )
                return Failure(None, text, diagnosis=mistake("no_vmap_rule", text))
        want, _ = _expected(checked, runs, dims)
        failure = _compare_outputs(
            checked, first, decoded_list(reply.outputs, "outputs"), want, words
        )
        if failure is not None:
            return failure
    names = first.grad_names()
    dims = patterns[0]
    _, grads = _expected(checked, runs, dims)
    for mode, words in (
        ("engine", "with gradients through the vmapped Function (your backward runs under vmap)"),
        ("grad", "with per-sample gradients, torch.func.vmap(torch.func.grad(loss))"),
    ):
        try:
            reply = checked.sandbox.answer(_request(runs, dims, mode))
        except LearnerFault as fault:
            return _error_failure(first, fault, words)
        failure = _compare_grads(first, names, decoded_list(reply.grads, "grads"), grads, words)
        if failure is not None:
            return failure
    return None


def vmap_stage(checked: Checked) -> StageOutcome:
    if len(checked.plan.state_runs) < BATCH:
        return summarise([], 0, "no batch to check")
    try:
        failure = _vmap_failure(checked)
    except LearnerFault as fault:
        failure = fault_failure(None, fault, "backward")
    return summarise(
        [failure] if failure is not None else [],
        1,
        f"under torch.func.vmap (a batch of {BATCH}, batch dim first or second) forward matches "
        "the reference sample by sample, and so do the gradients through autograd and "
        "torch.func.grad (per-sample gradients)",
    )
