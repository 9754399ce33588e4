"""The Function API stages for what forward tells autograd: ``mark_dirty`` and
``mark_non_differentiable``.

A spec lists what it teaches in ``function_api``; each entry adds a stage
(:data:`trainer.vocabulary.STAGES`). The learner's process uses the Function
as a program would (:mod:`trainer.checking.learner.api_calls`) and answers
with plain data; every comparison happens here, against the plan's reference
values or the reference expression evaluated here.

``mark_dirty``
    forward modifies its first tensor input in place and returns that very
    tensor. Called on an activation (a leaf that requires grad cannot be
    modified in place), the output must *be* the input, and a loss that uses
    the input after the call must get the reference gradient: without
    ``ctx.mark_dirty`` autograd still takes the tensor for the unmodified input.
``non_differentiable``
    every integer output (indices) is marked with
    ``ctx.mark_non_differentiable`` and every float output still carries a
    gradient. Where an integer output indexes the last dim of the first input
    (sort, topk, max), inputs with ties check that backward routes each
    gradient to the element forward's indices name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from trainer.checking import protocol
from trainer.checking.trusted.compare import compare_tensor
from trainer.checking.trusted.diagnosis import NamedMistake
from trainer.checking.trusted.plan import Run, differentiable, evaluate_reference
from trainer.checking.trusted.proxy import LearnerFault
from trainer.checking.trusted.stages import (
    Checked,
    Failure,
    StageOutcome,
    fault_diagnosis,
    output_name,
    summarise,
)
from trainer.checking.vjp import vector_jacobian
from trainer.spec import Exercise, TensorParam

# -- shared by the Function API stages -------------------------------------------------------


def decoded_list(value: object, key: str) -> list[Any]:
    """A list a reply holds (the learner's process sent it: it may be anything)."""
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise LearnerFault(f"the learner's process sent an unreadable {key}")
    return list(value)


def float64_runs(checked: Checked, count: int = 2) -> list[Run]:
    runs = [r for r in checked.plan.runs if r.dtype == torch.float64]
    return runs[:count] or list(checked.plan.runs[:1])


def requires_grad(run: Run) -> list[bool]:
    """For each of forward's arguments: whether the run asks for its gradient."""
    names = run.grad_names()
    return [p.name in names for p in run.params]


def reference_gradients(
    exercise: Exercise, run: Run, args: Sequence[object], upstream: Sequence[torch.Tensor]
) -> dict[str, torch.Tensor]:
    """Autograd of the reference at ``args`` (the run's parameters), weighted by ``upstream``."""
    names = run.grad_names()
    live = [
        a.detach().clone().requires_grad_(p.name in names) if isinstance(a, torch.Tensor) else a
        for a, p in zip(args, run.params, strict=True)
    ]
    outputs = evaluate_reference(exercise, live)
    leaves = [
        a
        for a, p in zip(live, run.params, strict=True)
        if p.name in names and isinstance(a, torch.Tensor)
    ]
    floats, weights = differentiable(outputs, upstream)
    grads = vector_jacobian(floats, leaves, weights, allow_unused=True)
    return {
        name: (g if g is not None else torch.zeros_like(leaf)).detach()
        for name, g, leaf in zip(names, grads, leaves, strict=True)
    }


def first_wrong_gradient(
    run: Run, got: Sequence[object], expected: dict[str, torch.Tensor]
) -> tuple[str, str, str] | None:
    """(input name, summary, detail) of the first gradient that differs from ``expected``."""
    for name, value in zip(run.grad_names(), got, strict=False):
        if value is None:
            return name, f"backward returned None for `{name}`, which requires grad", ""
        mismatch = compare_tensor(f"grad for `{name}`", expected[name], value, run.tolerance)
        if mismatch:
            return name, mismatch.summary, mismatch.detail
    return None


def mistake(kind: str, text: str, name: str = "") -> NamedMistake:
    return NamedMistake(mistake=kind, input=name, text=text)


def fault_failure(run: Run | None, fault: LearnerFault, during: str = "") -> Failure:
    return Failure(run, fault.message, fault.details, fault_diagnosis(fault))


# -- mark_dirty ------------------------------------------------------------------------------


def _dirty_position(exercise: Exercise) -> int:
    """The input an in-place Function modifies: its first float tensor."""
    return next(
        i for i, p in enumerate(exercise.parameters) if isinstance(p, TensorParam) and p.is_float
    )


def _mark_dirty_failure(checked: Checked, run: Run) -> Failure | None:
    exercise = checked.exercise
    position = _dirty_position(exercise)
    name = exercise.param_names[position]
    reply = checked.sandbox.answer(
        protocol.MarkDirty(
            args=run.fresh_args(), requires_grad=requires_grad(run), upstream=list(run.upstream)
        )
    )
    first = reply.same[0] if reply.same else None
    changed = position < len(reply.modified) and reply.modified[position]
    if first != position and not changed:
        text = (
            f"forward leaves `{name}` unchanged and returns a new tensor: an in-place op "
            f"modifies its input. Write the result into `{name}` (an in-place op such as "
            f"`{name}.exp_()`), call ctx.mark_dirty({name}) and return {name} itself"
        )
        return Failure(run, text, diagnosis=mistake("not_in_place", text, name))
    if first != position:
        text = (
            f"forward returned a new tensor, not its modified input: it changes `{name}` in "
            f"place but autograd was not told, so `{name}` still stands for the input. Call "
            f"ctx.mark_dirty({name}) and return {name}"
        )
        details = [
            f"a program keeps using `{name}` after the call (that is the point of an in-place "
            f"op); without the mark, its gradient skips your backward"
        ]
        return Failure(run, text, details, mistake("not_marked_dirty", text, name))
    if not (position < len(reply.rebased) and reply.rebased[position]):
        text = f"forward returns `{name}`, but autograd does not take it for your Function's output"
        return Failure(run, text, diagnosis=mistake("not_marked_dirty", text, name))
    grads = decoded_list(reply.grads, "grads")
    wrong = first_wrong_gradient(run, grads, run.expected_grads)
    if wrong is not None:
        # The output is the input and autograd knows it: a wrong gradient here is
        # backward's own (Backward parity says so too).
        _, summary, detail = wrong
        text = f"with a loss that uses `{name}` after the call, {summary}"
        return Failure(run, text, [detail] if detail else [])
    return None


def mark_dirty_stage(checked: Checked) -> StageOutcome:
    runs = float64_runs(checked)
    failures: list[Failure] = []
    for run in runs:
        try:
            failure = _mark_dirty_failure(checked, run)
        except LearnerFault as fault:
            failure = fault_failure(run, fault, "forward")
        if failure is not None:
            failures.append(failure)
    name = checked.exercise.param_names[_dirty_position(checked.exercise)]
    return summarise(
        failures,
        len(runs),
        f"called on an activation, forward modifies `{name}` in place and returns it, marked "
        f"dirty: a loss that uses `{name}` after the call gets the reference gradient",
    )


# -- mark_non_differentiable -----------------------------------------------------------------


def _index_pairs(run: Run) -> list[tuple[int, int]]:
    """(values output, indices output) pairs where the indices name positions along the
    last dim of the first float input and the values are that input's elements there
    (sort, topk, max)."""
    tensors = [a for a in run.args if isinstance(a, torch.Tensor) and a.is_floating_point()]
    if not tensors:
        return []
    source = tensors[0]
    pairs = []
    for i, indices in enumerate(run.expected_outputs):
        if indices.is_floating_point() or indices.dim() != source.dim() or indices.numel() == 0:
            continue
        if int(indices.min()) < 0 or int(indices.max()) >= source.shape[-1]:
            continue
        try:
            picked = source.gather(-1, indices)
        except RuntimeError:
            continue
        for v, found in enumerate(run.expected_outputs):
            if (
                found.is_floating_point()
                and found.shape == picked.shape
                and torch.equal(found, picked)
            ):
                pairs.append((v, i))
                break
    return pairs


def _marks_failure(
    checked: Checked, run: Run, reply: protocol.NonDifferentiableReply
) -> Failure | None:
    exercise = checked.exercise
    marked, requires = reply.marked, reply.requires_grad
    for index, expected in enumerate(run.expected_outputs):
        is_marked = index < len(marked) and marked[index]
        output_requires_grad = index < len(requires) and requires[index]
        what = output_name(exercise, index)
        if not expected.is_floating_point() and not is_marked:
            text = (
                f"forward does not mark {what} non-differentiable: call "
                "ctx.mark_non_differentiable on the indices in forward (or setup_context)"
            )
            details = [
                "torch already refuses a gradient to an integer tensor, so nothing fails "
                "here yet; the mark is the Function's own statement that no gradient flows "
                "through that output, and it is what makes a float output (a mask, a rank) "
                "non-differentiable"
            ]
            return Failure(run, text, details, mistake("not_marked_non_differentiable", text))
        if expected.is_floating_point() and (is_marked or not output_requires_grad):
            text = (
                f"{what} does not require grad after the call: "
                + ("forward marks it non-differentiable" if is_marked else "it is detached")
                + ", so no gradient reaches the inputs through it. Mark only the indices"
            )
            return Failure(run, text, diagnosis=mistake("marks_differentiable_output", text))
    return None


def _tied(run: Run) -> list[object]:
    """The run's arguments with the first float input rounded to integers, its first row
    all equal: ties everywhere."""
    args = list(run.args)
    position = next(
        i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.is_floating_point()
    )
    source = args[position]
    assert isinstance(source, torch.Tensor)
    tied = source.round()  # a few integer levels: ties within most rows
    if tied.dim() >= 1 and tied.numel():
        tied.reshape(-1, tied.shape[-1])[0] = 1.0  # and one row of equal values
    args[position] = tied
    return args


def _ties_failure(
    checked: Checked, run: Run, pairs: list[tuple[int, int]], args: list[object] | None = None
) -> Failure | None:
    """With ``args`` (a plan's tie run: ties at every pair of positions, straddling the
    last place taken too) or else the run's values rounded (``_tied``): valid indices, and
    each value's gradient where forward's indices say."""
    exercise = checked.exercise
    args = _tied(run) if args is None else args
    with torch.no_grad():
        expected = evaluate_reference(exercise, args)
    upstream = [
        torch.randn(e.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(7)).to(
            e.dtype
        )
        if e.is_floating_point()
        else torch.zeros_like(e)
        for e in expected
    ]
    reply = checked.sandbox.answer(
        protocol.NonDifferentiable(args=args, requires_grad=requires_grad(run), upstream=upstream)
    )
    outputs = decoded_list(reply.outputs, "outputs")
    grads = decoded_list(reply.grads, "grads")
    position = next(
        i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.is_floating_point()
    )
    source = args[position]
    assert isinstance(source, torch.Tensor)
    name = exercise.param_names[position]
    gradient = torch.zeros_like(source)
    for v, i in pairs:
        got_values, got_indices = (
            (outputs[v], outputs[i]) if max(v, i) < len(outputs) else (None, None)
        )
        mismatch = compare_tensor(output_name(exercise, v), expected[v], got_values, run.tolerance)
        if mismatch:
            return Failure(
                run, f"with tied values in `{name}`, {mismatch.summary}", [mismatch.detail]
            )
        assert isinstance(got_indices, torch.Tensor)
        if got_indices.shape != expected[i].shape or got_indices.dtype != expected[i].dtype:
            return Failure(
                run,
                f"with tied values in `{name}`, {output_name(exercise, i)} has the wrong shape or dtype",
            )
        valid = bool(((got_indices >= 0) & (got_indices < source.shape[-1])).all()) and torch.equal(
            source.gather(-1, got_indices.clamp(0, source.shape[-1] - 1)), expected[v]
        )
        ordered = got_indices.sort(dim=-1).values
        distinct = (
            bool((ordered[..., 1:] != ordered[..., :-1]).all()) if ordered.shape[-1] > 1 else True
        )
        if not (valid and distinct):
            text = (
                f"with tied values in `{name}`, {output_name(exercise, i)} does not name "
                "distinct elements that hold the values returned"
            )
            return Failure(run, text)
        gradient = gradient.scatter_add(-1, got_indices, upstream[v])
    wanting = run.grad_names()
    if name not in wanting:
        return None
    got = grads[wanting.index(name)] if wanting.index(name) < len(grads) else None
    mismatch = compare_tensor(f"grad for `{name}`", gradient, got, run.tolerance)
    if mismatch:
        text = (
            f"with tied values in `{name}`, the gradient does not go to the elements your "
            f"indices name: {mismatch.summary}. Which of equal elements is reported is "
            "forward's choice; backward must scatter through the indices forward returned "
            "(save them), not find the positions again"
        )
        return Failure(run, text, [mismatch.detail], mistake("tie_gradient", text, name))
    return None


def non_differentiable_stage(checked: Checked) -> StageOutcome:
    runs = float64_runs(checked)
    failures: list[Failure] = []
    checked_ties = False
    for run in runs:
        try:
            reply = checked.sandbox.answer(
                protocol.NonDifferentiable(
                    args=run.fresh_args(),
                    requires_grad=requires_grad(run),
                    upstream=list(run.upstream),
                )
            )
            failure = _marks_failure(checked, run, reply)
            if failure is None:
                wrong = first_wrong_gradient(
                    run, decoded_list(reply.grads, "grads"), run.expected_grads
                )
                if wrong is not None:
                    failure = Failure(run, wrong[1], [wrong[2]] if wrong[2] else [])
            pairs = _index_pairs(run)
            if failure is None and pairs:
                checked_ties = True
                failure = _ties_failure(checked, run, pairs)
        except LearnerFault as fault:
            failure = fault_failure(run, fault, "backward")
        if failure is not None:
            failures.append(failure)
    for run in checked.plan.tie_runs if not failures else ():
        pairs = _index_pairs(run)
        try:
            failure = _ties_failure(checked, run, pairs, list(run.args)) if pairs else None
        except LearnerFault as fault:
            failure = fault_failure(run, fault, "backward")
        if failure is not None:
            failures.append(failure)
            break  # one tie pattern is enough to show the rule
    integers = [
        output_name(checked.exercise, i)
        for i, o in enumerate(runs[0].expected_outputs)
        if not o.is_floating_point()
    ]
    return summarise(
        failures,
        len(runs),
        f"{', '.join(integers) or 'no output'} marked non-differentiable, every float output "
        "carries its gradient"
        + (
            ", and with tied values each gradient goes where forward's indices say"
            if checked_ties
            else ""
        ),
    )
