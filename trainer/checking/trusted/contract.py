"""The backward contract: what ``backward`` returns, before autograd touches it.

Autograd forgives a lot: it sums a broadcastable gradient to the input's shape,
casts a float32 gradient to float64 and never looks at ``grad_output`` again.
Each forgiven bug passes ``gradcheck`` and waits for a real model. Here the
learner's ``backward`` is called directly on its real context and held to the
contract: one value per input, ``None`` for non-tensors, exact shapes and
dtypes, ``grad_output`` left alone; then the same through autograd with
non-contiguous and stride-0 gradients and with subsets of inputs requiring grad:
every subset on the smallest run of each set of inputs that can require grad,
each input alone and each left out on the others (a ``needs_input_grad`` branch
reads one flag: what it gets wrong shows on any shape; ``2**n - 2`` subsets on
every run would be 126 calls a run for an LSTM cell's seven inputs).
"""

from __future__ import annotations

import itertools

import torch

from trainer.checking.trusted.compare import compare_tensor, describe_value, shape_text
from trainer.checking.trusted.diagnosis import classify, named
from trainer.checking.trusted.plan import SMALL, Run
from trainer.checking.trusted.proxy import LearnerFault, forward_outputs
from trainer.checking.trusted.returned import not_a_tensor_words
from trainer.checking.trusted.stages import (
    Checked,
    Failure,
    StageOutcome,
    fault_diagnosis,
    learner_gradients,
    summarise,
)
from trainer.checking.wording import changed_words
from trainer.spec import ScalarParam, TensorParam


def _size(count: int) -> str:
    return f"{count} B" if count < 1024 else f"{count / 1024:.1f} kB"


def _raw_return(checked: Checked, run: Run, notes: set[str]) -> Failure | None:
    """Call backward directly on a real context and check what it returns."""
    exercise, sandbox = checked.exercise, checked.sandbox
    params = run.params
    flags = [isinstance(p, TensorParam) and p.requires_grad for p in params]
    try:
        reply = sandbox.forward(run.fresh_args(), flags)
        forward_outputs(reply.outputs, exercise)
    except LearnerFault as fault:
        return Failure(
            run, f"forward failed: {fault.message}", fault.details, fault_diagnosis(fault)
        )
    handle = reply.handle
    if handle is None:
        return Failure(run, "forward's output is not connected to your backward")
    _advise(checked, run, reply.advice, notes)
    try:
        back = sandbox.backward(handle, run.upstream)
        raw = back.result
    except LearnerFault as fault:
        return Failure(run, fault.message, fault.details, fault_diagnosis(fault))

    if isinstance(raw, list):
        text = "backward returned a list: return a tuple, which is what autograd accepts"
        return Failure(run, text, diagnosis=named("not_a_tensor", text))
    values = raw if isinstance(raw, tuple) else (raw,)
    names = ", ".join(f"`{p.name}`" for p in params)
    optional = sandbox.optional_inputs
    surplus = len(values) - len(params)
    if (
        surplus > 0
        and (optional < 0 or surplus <= optional)
        and all(v is None for v in values[len(params) :])
    ):
        # Trailing Nones for forward's optional parameters (``dtype=None``), which autograd
        # drops: legal. One past them is a miscount, which autograd forgives silently.
        values = values[: len(params)]
    if len(values) != len(params):
        scalars = [p.name for p in params if isinstance(p, ScalarParam)]
        advice = f", with None for {', '.join(f'`{n}`' for n in scalars)}" if scalars else ""
        count = f"{len(values)} value{'s' * (len(values) != 1)}"
        extra = (
            " (a trailing None is fine only for a parameter of forward that has a default)"
            if len(values) > len(params)
            else ""
        )
        text = (
            f"backward returned {count} but forward is called with {len(params)} "
            f"input{'s' * (len(params) != 1)} ({names}): "
            f"return one per input, in order{advice}{extra}"
        )
        return Failure(run, text, diagnosis=named("wrong_count", text))
    for param, value in zip(params, values, strict=True):
        failure = _check_value(run, param, value)
        if failure is not None:
            return failure
        if isinstance(param, TensorParam) and not param.requires_grad and value is not None:
            notes.add(
                f"backward returns a tensor for `{param.name}`, which never gets a gradient "
                f"({'an integer tensor' if not param.is_float else 'it does not require grad'}): "
                "autograd drops it; return None there"
            )
        if run.dtype == torch.float64 and _computed_in_float32(
            value, run.expected_grads.get(param.name)
        ):
            notes.add(
                f"the gradient for `{param.name}` looks computed in float32 and cast back: "
                "its float64 values are all float32 numbers. Keep grad_output's dtype "
                "(multiply by a bool mask, or use mask.to(grad_output.dtype))"
            )
    if back.changed:
        text = changed_words(back.changed)
        return Failure(run, text, diagnosis=named("changes_caller_tensors", text, back.changed[0]))
    if back.modified:
        return Failure(
            run,
            "backward modified grad_output in place (e.g. grad_output[mask] = 0 or "
            "grad_output.mul_()): autograd may hand the same tensor to other functions; "
            "work on a copy (grad_output.clone()) or use out-of-place ops",
            diagnosis=named("in_place_grad_output", "grad_output modified in place", "grad_output"),
        )
    # Layouts are about memory, not precision: the float64 runs say it.
    return _expanded(checked, run, flags) if run.dtype == torch.float64 else None


def _float32_share(tensor: torch.Tensor) -> float:
    values = tensor.detach().reshape(-1)
    return float((values.float().double() == values).double().mean())


def _computed_in_float32(value: object, expected: torch.Tensor | None) -> bool:
    """A float64 result whose every value is a float32 number, where the true one's are not."""
    if not isinstance(value, torch.Tensor) or expected is None or value.dtype != torch.float64:
        return False
    if value.shape != expected.shape or value.numel() < 4:
        return False
    nonzero = value.reshape(-1) != 0
    if int(nonzero.sum()) < 4:
        return False
    return _float32_share(value.reshape(-1)[nonzero]) == 1.0 and _float32_share(expected) < 0.5


def _check_value(run: Run, param: TensorParam | ScalarParam, value: object) -> Failure | None:
    name = param.name
    if isinstance(param, ScalarParam):
        if value is None:
            return None
        text = (
            f"backward returned {describe_value(value)} for `{name}`, a Python {param.kind}: "
            f"return None for it (only tensors get gradients)"
        )
        return Failure(run, text, diagnosis=named("grad_for_non_tensor", text, name))
    if not param.requires_grad and (value is None or isinstance(value, torch.Tensor)):
        return None  # autograd drops it; a note says None is the honest value
    if value is None:
        text = f"backward returned None for `{name}`, which requires grad"
        return Failure(run, text, diagnosis=named("none_for_required", text, name))
    if not isinstance(value, torch.Tensor):
        text = not_a_tensor_words(value, f"`{name}`")
        return Failure(run, text, diagnosis=named("not_a_tensor", text, name))
    expected = run.expected_grads.get(name)
    if expected is None:
        return None
    if value.shape != expected.shape:
        return _shape_failure(run, name, expected, value)
    if value.dtype != expected.dtype:
        text = (
            f"grad for `{name}` has dtype {value.dtype} but `{name}` is {expected.dtype}: "
            "compute in the input's dtype (autograd would cast it silently)"
        )
        return Failure(run, text, diagnosis=named("wrong_dtype", text, name))
    if value.device != expected.device:
        text = f"grad for `{name}` is on {value.device} but `{name}` is on {expected.device}"
        return Failure(run, text, diagnosis=named("wrong_device", text, name))
    return None


def _shape_failure(run: Run, name: str, expected: torch.Tensor, value: torch.Tensor) -> Failure:
    text = (
        f"grad for `{name}` has shape {shape_text(value.shape)} but `{name}` has shape "
        f"{shape_text(expected.shape)}"
    )
    mistake, _ = classify(expected, value, rtol=max(run.tolerance.rtol * 100, 1e-4), atol=1e-5)
    if mistake == "not_summed_over_batch":
        text += (
            ": sum over the batch dimension. (Autograd would sum it for you silently, "
            "so gradcheck passes, but the contract is one gradient per input, shaped like it.)"
        )
    elif mistake == "transposed":
        text += ": it is transposed"
    elif mistake == "wrong_shape":
        text += ": drop the extra size-1 dimension (sum without keepdim, or squeeze)"
    else:
        mistake = "wrong_shape"
        text += ": a gradient always has the shape of its input"
    return Failure(run, text, diagnosis=named(mistake, text, name))


def _raw_values(checked: Checked, run: Run, flags: list[bool], layout: str) -> tuple[object, ...]:
    """backward's return for an upstream gradient of ones, handed over in ``layout``."""
    sandbox = checked.sandbox
    handle = sandbox.forward(run.fresh_args(), flags).handle
    if handle is None:
        raise LearnerFault("forward's output is not connected to your backward")
    raw = sandbox.backward(handle, run.ones, layout=layout).result
    return tuple(raw) if isinstance(raw, tuple | list) else (raw,)


def _expanded(checked: Checked, run: Run, flags: list[bool]) -> Failure | None:
    """Backward with the stride-0 ones that `loss = y.sum()` hands down must act like plain ones."""
    plain = _raw_values(checked, run, flags, "plain")
    try:
        expanded = _raw_values(checked, run, flags, "expanded")
    except LearnerFault as fault:
        text = (
            "backward fails with the stride-0 grad_output that `loss = y.sum()` produces "
            f"(an expanded tensor): {fault.message}. Do not write into grad_output; "
            "use .reshape rather than .view"
        )
        return Failure(
            run,
            text,
            fault.details,
            diagnosis=named("in_place_grad_output", text, "grad_output"),
        )
    for param, mine, theirs in zip(run.params, expanded, plain, strict=False):
        if not isinstance(mine, torch.Tensor) or not isinstance(theirs, torch.Tensor):
            continue
        mismatch = compare_tensor(f"grad for `{param.name}`", theirs, mine, run.tolerance)
        if mismatch:
            text = (
                f"with the stride-0 grad_output of `loss = y.sum()`, {mismatch.summary} "
                "compared with the same ones in a plain tensor"
            )
            return Failure(
                run, text, [mismatch.detail], diagnosis=named("non_contiguous", text, param.name)
            )
    return None


def _advise(checked: Checked, run: Run, advice: object, notes: set[str]) -> None:
    if not isinstance(advice, dict):
        return
    attributes = advice.get("tensor_attributes")
    if isinstance(attributes, list) and attributes:
        shown = ", ".join(f"`ctx.{a}`" for a in attributes[:4])
        notes.add(
            f"forward keeps tensors as ctx attributes ({shown}): use ctx.save_for_backward, "
            "which lets autograd detect an in-place change of a saved tensor and frees it "
            "after backward"
        )
    reference = checked.reference_saved.get(run.label)
    mine = advice.get("saved_bytes")
    if isinstance(mine, int) and reference is not None and mine > reference:
        notes.add(
            f"forward saves {_size(mine)} for backward where the reference solution saves "
            f"{_size(reference)} (for {run.label}): save only what backward needs"
        )


def _consistent(
    checked: Checked,
    run: Run,
    reference: dict[str, torch.Tensor | None],
    requires_grad: set[str] | None = None,
) -> Failure | None:
    """The learner's gradients, as set up now, against its own plain ones."""
    grads = learner_gradients(
        checked.function_class, run, checked.exercise, requires_grad=requires_grad
    )
    if isinstance(grads, Failure):
        return grads
    for name, got in grads.items():
        mine = reference.get(name)
        if mine is None:
            continue
        if got is None:
            return Failure(run, f"backward returned None for `{name}`, which requires grad")
        mismatch = compare_tensor(f"grad for `{name}`", mine, got, run.tolerance)
        if mismatch:
            return Failure(
                run, f"{mismatch.summary} (compared with your own plain result)", [mismatch.detail]
            )
    return None


def _subsets(names: list[str], every: bool) -> list[tuple[str, ...]]:
    """The proper, non-empty subsets of ``names`` to try: all of them when ``every``, else
    each name alone and every name but one (in that order, without repeats)."""
    if every:
        sizes = range(1, len(names))
        return [s for size in sizes for s in itertools.combinations(names, size)]
    alone = [(name,) for name in names]
    but_one = [tuple(n for n in names if n != name) for name in names]
    return list(dict.fromkeys(s for s in alone + but_one if 0 < len(s) < len(names)))


def _exhaustive_runs(runs: tuple[Run, ...]) -> set[int]:
    """The runs that try every subset of inputs requiring grad (by index in ``runs``): the
    smallest float64 run of each set of names that can require grad."""
    smallest: dict[tuple[str, ...], int] = {}
    for index, run in enumerate(runs):
        if run.dtype != torch.float64:
            continue
        names = tuple(run.grad_names())
        if names not in smallest or run.numel < runs[smallest[names]].numel:
            smallest[names] = index
    return set(smallest.values())


def _float32_layout_run(runs: tuple[Run, ...]) -> int | None:
    """The float32 run that tries the layouts (by index in ``runs``): the one of most
    dimensions (channels-last needs three), the smallest of those. Every float64 run
    tries them; in float32 one run asks the same question at a fraction of the cost."""
    narrow = [i for i, r in enumerate(runs) if r.dtype == torch.float32]
    return min(narrow, key=lambda i: (-_dimensions(runs[i]), runs[i].numel), default=None)


def _dimensions(run: Run) -> int:
    return max((a.dim() for a in run.args if isinstance(a, torch.Tensor)), default=0)


def _through_autograd(checked: Checked, run: Run, every_subset: bool) -> Failure | None:
    """Non-contiguous tensors and subsets of inputs requiring grad must not change the answer."""
    plain = learner_gradients(checked.function_class, run, checked.exercise)
    if isinstance(plain, Failure):
        return None  # a plain call already fails: backward parity says why
    failure = _in_every_layout(checked, run, plain)
    if failure is not None or run.dtype != torch.float64:
        return failure  # which inputs require grad is the same question in any dtype
    for subset in _subsets(run.grad_names(), every_subset):
        failure = _consistent(checked, run, plain, requires_grad=set(subset))
        if failure is not None:
            only = " and ".join(f"`{n}`" for n in subset)
            text = (
                f"with only {only} requiring grad, {failure.message}. Check your "
                "ctx.needs_input_grad branches"
            )
            return Failure(run, text, failure.details, named("needs_input_grad", text, subset[0]))
    return None


def _in_every_layout(
    checked: Checked, run: Run, plain: dict[str, torch.Tensor | None]
) -> Failure | None:
    """The learner's gradients with non-contiguous and channels-last tensors against its
    own plain ones, in the run's dtype: a layout is no more float64's than float32's."""
    with checked.sandbox.layouts(inputs="strided", grads="strided"):
        failure = _consistent(checked, run, plain)
    if failure is not None:
        text = f"with non-contiguous inputs and grad_output (as a transposed tensor gives), {failure.message}"
        details = [*failure.details, "use .reshape rather than .view, and no in-place writes"]
        return Failure(run, text, details, named("non_contiguous", text))
    if any(isinstance(a, torch.Tensor) and a.dim() >= 3 for a in run.args):
        with checked.sandbox.layouts(inputs="permuted", grads="permuted"):
            failure = _consistent(checked, run, plain)
        if failure is not None:
            text = (
                "with inputs and grad_output stored channels-last (as a network's "
                "transposes and memory formats hand them over: heads split by a transpose, "
                f"a channels_last convolution), {failure.message}"
            )
            details = [*failure.details, "use .reshape rather than .view, and no in-place writes"]
            return Failure(run, text, details, named("non_contiguous", text))
    return None


def contract_stage(checked: Checked) -> StageOutcome:
    failures: list[Failure] = []
    notes: set[str] = set()
    # The contract is about what backward returns, not about size: small runs say it.
    runs = tuple(r for r in checked.plan.runs if r.numel <= SMALL) or checked.plan.runs[:1]
    exhaustive = _exhaustive_runs(runs)
    float32_layouts = _float32_layout_run(runs)
    for index, run in enumerate(runs):
        if failures and checked.stop_after_failure:
            break  # validate reads the first failure only: its stage and its mistake
        try:
            failure = _raw_return(checked, run, notes)
            if failure is None and (run.dtype == torch.float64 or index == float32_layouts):
                failure = _through_autograd(checked, run, index in exhaustive)
        except LearnerFault as fault:
            failure = Failure(run, fault.message, fault.details, fault_diagnosis(fault))
        if failure is not None:
            failures.append(failure)
    outcome = summarise(
        failures,
        len(runs),
        "backward returns one gradient per input, shaped and typed like it, leaves "
        "grad_output alone, and works with non-contiguous and stride-0 gradients"
        + (" and subsets of inputs requiring grad" if len(runs[0].grad_names()) > 1 else ""),
    )
    outcome.notes = sorted(notes)
    return outcome
