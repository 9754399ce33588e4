"""The "calls as in training" stage: a Function is a pure function of ctx and its inputs.

Every other stage runs one forward, then its backward, on fresh state. A
training loop does more: hundreds of calls with fresh values of the same
shape, two calls in one graph whose backwards run in reverse order, a second
backward over a retained graph, gradients accumulated over two steps, and
losses that use only some outputs. The learner's process does each of these
with its own autograd engine; every gradient that comes back is compared here
with the reference for that very call. A backward that keeps the saved output
on the class, caches a derivative by shape, reuses a module-level buffer or
changes after N calls fails, and the message names the call.
"""

from __future__ import annotations

import dataclasses
import time
import typing
from collections.abc import Callable, Sequence

import torch

from trainer.checking import protocol
from trainer.checking.trusted.compare import compare_tensor
from trainer.checking.trusted.diagnosis import NamedMistake, named
from trainer.checking.trusted.plan import LIVE_CALLS, SMALL, Run, differentiable, evaluate_reference
from trainer.checking.trusted.proxy import LearnerFault, LearnerProcessEnded
from trainer.checking.trusted.stages import FAIL, PASS, Checked, Failure, StageOutcome
from trainer.checking.vjp import vector_jacobian
from trainer.spec import TensorParam

REPEATED_CALLS = 500
REPEAT_BUDGET = 3.0  # seconds of the learner's time for the repeated calls


def _call(run: Run, upstream: Sequence[torch.Tensor | None]) -> protocol.Call:
    names = run.grad_names()
    return protocol.Call(
        args=list(run.args),
        requires_grad=[p.name in names for p in run.params],
        upstream=list(upstream),
    )


def _train(
    checked: Checked,
    scenario: str,
    calls: Sequence[tuple[Run, Sequence[torch.Tensor | None]]],
    order: Sequence[int] | None = None,
    budget: float | None = None,
    shared: Sequence[int] = (),
    fresh: bool = False,
) -> list[list[torch.Tensor | None]]:
    request = protocol.Train(
        scenario=scenario,
        sets=[_call(run, upstream) for run, upstream in calls],
        order=None if order is None else list(order),
        shared=list(shared),
        fresh=fresh,
    )
    if budget is not None:
        request.budget = budget
    reply = checked.sandbox.answer(request)
    if reply.stacked is not None:
        return _unstacked(reply.stacked, reply.calls)
    grads = reply.grads
    if not isinstance(grads, list) or not all(isinstance(g, list | tuple) for g in grads):
        raise LearnerFault("the gradients of these calls could not be read")
    return [list(g) for g in grads]


def _unstacked(stacked: object, calls: object) -> list[list[torch.Tensor | None]]:
    """Each call's gradients, from one tensor per input with a first dimension of calls."""
    if (
        type(calls) is not int
        or not isinstance(stacked, list)
        or not all(isinstance(t, torch.Tensor) and t.dim() and len(t) == calls for t in stacked)
    ):
        raise LearnerFault("the gradients of these calls could not be read")
    return [[t[call] for t in stacked] for call in range(calls)]


def _mismatch(
    run: Run, got: Sequence[object], expected: dict[str, torch.Tensor]
) -> tuple[str, str] | None:
    """The first input whose gradient is wrong: (summary, detail)."""
    for name, value in zip(run.grad_names(), got, strict=False):
        if value is None:
            return f"backward returned None for `{name}`, which requires grad", ""
        mismatch = compare_tensor(f"grad for `{name}`", expected[name], value, run.tolerance)
        if mismatch:
            return mismatch.summary, mismatch.detail
    return None


def repeat_pool(checked: Checked) -> list[Run]:
    """The value sets the calls in a row draw from: fresh values of the first case, and
    the first case's shapes with other cases' arguments (a pooling's count_include_pad,
    a convolution's stride, a dropout's p). Calls of one shape with other arguments
    follow one another, so a cache keyed by the shapes alone hands one call's answer to
    the other (calls of other shapes: the two calls in one graph)."""
    state = list(checked.plan.state_runs)
    return state + list(checked.plan.sibling_runs) if state else []


def _repeated(checked: Checked, run: Run) -> Failure | None:
    runs = repeat_pool(checked)
    if not runs:
        return None
    generator = torch.Generator().manual_seed(1)
    order = torch.randint(0, len(runs), (REPEATED_CALLS,), generator=generator).tolist()
    order[: len(runs)] = range(len(runs))  # every value set once first
    started = time.monotonic()
    grads = _train(checked, "repeat", [(r, r.upstream) for r in runs], order, REPEAT_BUDGET)
    elapsed = time.monotonic() - started
    if len(grads) < len(order) and elapsed < REPEAT_BUDGET:
        # Only a slow backward may make fewer calls, and only when its time is up.
        raise LearnerFault(
            f"the learner's process stopped after {len(grads)} of {len(order)} calls "
            f"in {elapsed:.2f} s, before its time was up"
        )
    order = order[: len(grads)]  # a slow backward makes fewer calls in its time budget
    wrong_calls = _wrong_calls([runs[i] for i in order], grads)
    if not wrong_calls:
        return None
    call = wrong_calls[0]
    index = order[call - 1]
    run = runs[index]
    wrong = _mismatch(run, grads[call - 1], run.expected_grads)
    summary, detail = wrong if wrong is not None else ("the gradient is wrong", "")
    right_same = [c for c, i in enumerate(order, start=1) if i == index and c not in wrong_calls]
    if len(wrong_calls) == len(order) and checked.verdicts.get("backward") == FAIL:
        # Every call wrong, as Backward parity already found: the formula, not state. (A
        # backward right there and wrong on every call here kept state from those calls.)
        text = (
            f"every one of the {len(order)} calls gives a wrong gradient ({summary}): "
            "the gradient is wrong whatever came before, as Backward parity shows"
        )
        return Failure(run, text, [detail] if detail else [])
    if not right_same and _wrong_on_its_own(checked, run):
        # A fresh copy of the file is wrong for these inputs too: not state, but a
        # formula or shape mistake that only these inputs show.
        text = (
            f"for the inputs of call {call} ({run.case.describe()}), {summary}, and on "
            "every call with them: the gradient is wrong for such inputs whatever came "
            "before (not state kept between calls)"
        )
        return Failure(run, text, [detail] if detail else [])
    if right_same:
        text = (
            f"backward gave a different gradient on call {call} than on call {right_same[0]} "
            f"for the same inputs ({summary}): it depends on something outside ctx and "
            "its inputs (state kept between calls?)"
        )
    else:
        text = (
            f"on call {call} of {len(order)} ({run.case.describe()}; fresh values), {summary}, "
            "though a fresh copy of your file gets these inputs right: backward uses something "
            "kept from an earlier call (a cache, a class attribute, a global)"
        )
    return Failure(run, text, [detail] if detail else [], _state_mistake(text))


def _wrong_on_its_own(checked: Checked, run: Run) -> bool:
    """Whether a fresh copy of the learner's file (no state of earlier calls) gives a wrong
    gradient for ``run`` too."""
    (alone,) = _train(checked, "repeat", [(run, run.upstream)], [0], fresh=True)
    return _mismatch(run, alone, run.expected_grads) is not None


def _far_ahead(checked: Checked, run: Run) -> Failure | None:
    """One call, then the ints it moved in the file (its call counters) moved a billion
    calls ahead, as a long training run leaves them, and one more call: a backward that
    changes after N calls fails for any N, not only below the calls made here."""
    first = (repeat_pool(checked) or [run])[0]
    request = protocol.Train(scenario="later", sets=[_call(first, first.upstream)])
    reply = checked.sandbox.answer(request)
    grads = reply.grads
    if not isinstance(grads, list) or not all(isinstance(g, list | tuple) for g in grads):
        raise LearnerFault("the gradients of these calls could not be read")
    if not grads:
        return None  # no counter, or none the learner's code survives being moved
    wrong = _mismatch(first, grads[0], first.expected_grads)
    if wrong is None:
        return None
    summary, detail = wrong
    names = ", ".join(f"`{name}`" for name in reply.moved[:3])
    text = (
        f"with the counters your file keeps ({names}) moved a billion calls ahead, as a "
        f"long training run leaves them, {summary}: the gradient must not depend on how "
        "many calls came before"
    )
    return Failure(first, text, [detail] if detail else [], _state_mistake(text))


def _wrong_calls(calls: Sequence[Run], grads: list[list[torch.Tensor | None]]) -> list[int]:
    """The calls (counted from 1, ``calls`` holding each call's run) whose gradients are
    wrong, compared all at once per shape rather than one call at a time: each against
    its own call's reference, by ``compare_tensor``'s elementwise rule (a NaN counts as
    wrong here). A call whose gradients are missing or of another shape or dtype is wrong."""
    wrong: set[int] = set()
    groups: dict[tuple[object, ...], list[int]] = {}
    for index, (call, answer) in enumerate(zip(calls, grads, strict=True)):
        expected = [call.expected_grads[n] for n in call.grad_names()]
        if len(answer) < len(expected) or not all(
            isinstance(g, torch.Tensor) and g.shape == e.shape and g.dtype == e.dtype
            for g, e in zip(answer, expected, strict=False)
        ):
            wrong.add(index + 1)
            continue
        key = (
            tuple(call.grad_names()),
            tuple((e.shape, e.dtype) for e in expected),
            call.tolerance,
        )
        groups.setdefault(key, []).append(index)
    for members in groups.values():
        first = calls[members[0]]
        tolerance = first.tolerance
        for slot, name in enumerate(first.grad_names()):
            want = torch.stack([calls[i].expected_grads[name].to(torch.float64) for i in members])
            got = torch.stack([typing.cast(torch.Tensor, grads[i][slot]) for i in members])
            bad = ~(
                (got.to(torch.float64) - want).abs() <= tolerance.atol + tolerance.rtol * want.abs()
            )
            rows = bad.reshape(len(members), -1).any(dim=1).tolist()
            wrong.update(i + 1 for i, is_bad in zip(members, rows, strict=True) if is_bad)
    return sorted(wrong)


def _one_graph(checked: Checked, run: Run) -> Failure | None:
    """Two calls in one graph, with different values and arguments; backward runs in reverse."""
    runs = [r for r in checked.plan.runs if r.dtype == torch.float64]
    if len(runs) < 2:
        runs = list(checked.plan.state_runs[:2])
    if len(runs) < 2:
        return None
    first, second = runs[0], runs[1]
    grads = _train(checked, "one_graph", [(first, first.upstream), (second, second.upstream)])
    for number, (run, got) in enumerate(zip((first, second), grads, strict=True), start=1):
        wrong = _mismatch(run, got, run.expected_grads)
        if wrong is not None:
            summary, detail = wrong
            if _wrong_on_its_own(checked, run):
                # Wrong in a call of its own too: the formula, for these inputs.
                text = (
                    f"for call {number} of two in one graph ({run.case.describe()}), {summary}, "
                    "and a fresh copy of your file called with the same inputs alone is wrong "
                    "too: the gradient is wrong for such inputs (not state kept between calls)"
                )
                return Failure(run, text, [detail] if detail else [])
            text = (
                f"with two calls in one graph (call 1: {first.case.describe()}; call 2: "
                f"{second.case.describe()}; backward runs for call 2 first), {summary} for "
                f"call {number}: keep what backward needs on ctx, not on the class or in a global"
            )
            return Failure(run, text, [detail] if detail else [], _state_mistake(text))
    return None


def _one_graph_same_shape(checked: Checked, run: Run) -> Failure | None:
    """Two calls of the same shape and dtype in one graph, backward for the second first:
    a backward that keeps what it needs in a cache keyed by shape collides."""
    runs = checked.plan.state_runs
    if len(runs) < 2:
        return None
    first, second = runs[0], runs[1]
    grads = _train(checked, "one_graph", [(first, first.upstream), (second, second.upstream)])
    return _first_wrong_call(
        (first, second),
        grads,
        lambda number, summary: (
            f"with two calls of the same shape in one graph ({first.case.describe()}; "
            f"backward runs for call 2 first), {summary} for call {number}, though each "
            "call on its own is right: keep what backward needs on ctx, not in a cache "
            "shared by calls (keyed by shape, say)"
        ),
    )


LIVE_SHAPED = 16  # of those calls, the most taken from runs of other shapes and arguments


def _many_in_one_graph(checked: Checked, run: Run) -> Failure | None:
    """Many calls in one graph, each with values of its own, then one backward pass: a
    network's layers. A backward that keeps what it needs outside ctx, in a table of
    the last few calls, finds it gone for the earlier calls (two in one graph fit a
    table of two)."""
    small = [r for r in checked.plan.runs if r.dtype == torch.float64 and r.numel <= SMALL]
    pool = [*checked.plan.state_runs, *small, *checked.plan.sibling_runs]
    # Every call with values of its own: other shapes and arguments first, then fresh
    # values of the first case up to LIVE_CALLS.
    shaped = list({id(r): r for r in pool}.values())[:LIVE_SHAPED]
    calls = shaped + list(checked.plan.live_runs[: LIVE_CALLS - len(shaped)])
    if len(calls) < 3:
        return None
    alive = (
        f"with {len(calls)} calls alive in one graph (as a network's layers; one backward "
        "pass for all)"
    )
    keep = "keep what backward needs on ctx, not in a table of recent calls, on the class or in a global"
    try:
        grads = _train(checked, "one_graph", [(r, r.upstream) for r in calls])
    except LearnerFault as fault:
        if fault.mistake or isinstance(fault, LearnerProcessEnded):
            raise  # a mistake of its own (the callers' tensors changed), or no process left
        # Every call on its own, and 500 in a row, ran before: only the calls alive
        # together differ.
        text = f"{alive}, {fault.message}, though each call on its own runs: {keep}"
        return Failure(calls[0], text, fault.details, _state_mistake(text))
    if len(grads) != len(calls):
        raise LearnerFault("the gradients of these calls could not be read")
    for number in _wrong_calls(calls, grads):  # then each alone, for its words
        call, got = calls[number - 1], grads[number - 1]
        wrong = _mismatch(call, got, call.expected_grads)
        if wrong is None:
            continue
        summary, detail = wrong
        if _wrong_on_its_own(checked, call):
            text = (
                f"for call {number} of {len(calls)} in one graph ({call.case.describe()}), "
                f"{summary}, and a fresh copy of your file called with the same inputs alone "
                "is wrong too: the gradient is wrong for such inputs (not state kept "
                "between calls)"
            )
            return Failure(call, text, [detail] if detail else [])
        text = f"{alive}, {summary} for call {number}, though each call on its own is right: {keep}"
        return Failure(call, text, [detail] if detail else [], _state_mistake(text))
    return None


def _first_wrong_call(
    calls: Sequence[Run],
    grads: list[list[torch.Tensor | None]],
    words: Callable[[int, str], str],
) -> Failure | None:
    """The first of ``calls`` whose gradients are wrong, as state kept between calls, in
    ``words(number, summary)``."""
    for number, (call, got) in enumerate(zip(calls, grads, strict=True), start=1):
        wrong = _mismatch(call, got, call.expected_grads)
        if wrong is not None:
            summary, detail = wrong
            text = words(number, summary)
            return Failure(call, text, [detail] if detail else [], _state_mistake(text))
    return None


def _shared_parameter(checked: Checked, run: Run) -> Failure | None:
    """One parameter tensor used by two calls in one graph (tied weights, one norm for q
    and k): its gradient sums both uses, and a backward that keys saved values by the
    parameter's identity mixes the calls up."""
    runs = checked.plan.state_runs
    if len(runs) < 2:
        return None
    first, second = runs[0], runs[1]
    names = first.grad_names()
    tensors = [
        i
        for i, p in enumerate(first.params)
        if isinstance(p, TensorParam) and p.name in names and p.is_float
    ]
    if len(tensors) < 2:
        return None
    shared = tensors[1:]  # the first tensor is the input; the rest are parameters
    args = tuple(
        a1 if i in shared else a2
        for i, (a1, a2) in enumerate(zip(first.args, second.args, strict=True))
    )
    second = dataclasses.replace(second, args=args)
    got_first, got_second = _train(
        checked,
        "shared",
        [(first, first.upstream), (second, second.upstream)],
        shared=shared,
    )
    expected_first, expected_second = _shared_reference(checked, first, second, shared)
    own = [p.name for i, p in enumerate(first.params) if p.name in names and i not in shared]
    for call, got, expected, listed in (
        (first, got_first, expected_first, names),
        (second, got_second, expected_second, own),
    ):
        for name, value in zip(listed, got, strict=False):
            mismatch = (
                compare_tensor(f"grad for `{name}`", expected[name], value, call.tolerance)
                if isinstance(value, torch.Tensor)
                else None
            )
            if value is None or mismatch:
                summary = (
                    mismatch.summary
                    if mismatch
                    else f"backward returned None for `{name}`, which requires grad"
                )
                which = ", ".join(f"`{first.params[i].name}`" for i in shared)
                text = (
                    f"with {which} shared by two calls in one graph (tied weights), {summary}: "
                    "keep what backward needs on ctx, not keyed by the parameter (id(weight), "
                    "say) in a cache shared by calls"
                )
                detail = [mismatch.detail] if mismatch and mismatch.detail else []
                return Failure(call, text, detail, _state_mistake(text))
    return None


def _shared_reference(
    checked: Checked, first: Run, second: Run, shared: Sequence[int]
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """The reference's gradients when ``first`` and ``second`` share the tensors at
    ``shared`` (the second call's are the first's): the first call's inputs, shared ones
    summing both uses, and the second call's own inputs."""
    names = first.grad_names()

    def leaves(run: Run) -> list[object]:
        return [
            a.detach().clone().requires_grad_(p.name in names) if isinstance(a, torch.Tensor) else a
            for a, p in zip(run.args, run.params, strict=True)
        ]

    live_first, live_second = leaves(first), leaves(second)
    for i in shared:
        live_second[i] = live_first[i]
    terms = []
    for live, run in ((live_first, first), (live_second, second)):
        floats, weights = differentiable(evaluate_reference(checked.exercise, live), run.upstream)
        terms += [(f * w).sum() for f, w in zip(floats, weights, strict=True) if w is not None]
    loss = torch.stack(terms).sum()
    wanted_first = [a for a, p in zip(live_first, first.params, strict=True) if p.name in names]
    wanted_second = [
        a
        for i, (a, p) in enumerate(zip(live_second, second.params, strict=True))
        if p.name in names and i not in shared
    ]
    grads = torch.autograd.grad(loss, [*wanted_first, *wanted_second], allow_unused=True)  # type: ignore[arg-type]
    done = [
        (g if g is not None else torch.zeros_like(leaf)).detach()
        for g, leaf in zip(grads, [*wanted_first, *wanted_second], strict=True)
    ]
    own = [p.name for i, p in enumerate(second.params) if p.name in names and i not in shared]
    return (
        dict(zip(names, done[: len(names)], strict=True)),
        dict(zip(own, done[len(names) :], strict=True)),
    )


def _retained(checked: Checked, run: Run) -> Failure | None:
    grads = _train(checked, "retain_graph", [(run, run.upstream), (run, run.upstream_other)])
    for number, (got, expected) in enumerate(
        zip(grads, (run.expected_grads, run.expected_grads_other), strict=True), start=1
    ):
        wrong = _mismatch(run, got, expected)
        if wrong is not None:
            summary, detail = wrong
            text = (
                f"in backward pass {number} over one graph (retain_graph=True), {summary}: "
                "backward must not change what forward saved"
            )
            return Failure(run, text, [detail] if detail else [], _state_mistake(text))
    return None


def _accumulated(checked: Checked, run: Run) -> Failure | None:
    (got,) = _train(checked, "accumulate", [(run, run.upstream), (run, run.upstream_other)])
    expected = {
        name: run.expected_grads[name] + run.expected_grads_other[name] for name in run.grad_names()
    }
    wrong = _mismatch(run, got, expected)
    if wrong is None:
        return None
    summary, detail = wrong
    text = f"after two training steps on the same leaves (gradients accumulate in .grad), {summary}"
    return Failure(run, text, [detail] if detail else [], _state_mistake(text))


def _updated_in_place(checked: Checked, run: Run) -> Failure | None:
    """Two steps on the very same tensors, their values changed in place in between (an
    optimizer's step): a backward that keeps values by the tensor's identity (``id``, a
    weak reference, ``data_ptr``) reads the old ones on the second step."""
    runs = checked.plan.state_runs
    if len(runs) < 2:
        return None
    first, second = runs[0], runs[1]
    names = first.grad_names()
    tensors = [
        i
        for i, p in enumerate(first.params)
        if isinstance(p, TensorParam) and p.name in names and p.is_float
    ]
    grads = _train(
        checked,
        "update_in_place",
        [(first, first.upstream), (second, second.upstream)],
        shared=tensors[1:],  # the parameters, passed as the leaves themselves
    )
    return _first_wrong_call(
        (first, second),
        grads,
        lambda number, summary: (
            f"on step {number} of two on the very same tensors, their values changed in "
            f"place in between as an optimizer's step changes them, {summary}, though "
            "each step alone is right: backward keeps values by the tensor's identity "
            "(id, a weak reference, data_ptr), and the tensor's values changed"
        ),
    )


def _some_outputs(checked: Checked, run: Run) -> Failure | None:
    """Losses that use one output only: autograd hands zeros (or None) for the others."""
    count = checked.exercise.outputs
    # An integer output (sort's indices) takes no gradient: no loss uses it alone.
    floats = [i for i, o in enumerate(run.expected_outputs) if o.is_floating_point()]
    if len(floats) < 2:
        return None
    calls = []
    for used in floats:
        upstream: list[torch.Tensor | None] = [None] * count
        upstream[used] = run.upstream[used]
        calls.append((run, upstream))
    grads = _train(checked, "some_outputs", calls)
    for used, got in zip(floats, grads, strict=True):
        weights = tuple(
            u if index == used else torch.zeros_like(u) for index, u in enumerate(run.upstream)
        )
        expected = _reference_grads(checked, run, weights)
        wrong = _mismatch(run, got, expected)
        if wrong is not None:
            summary, detail = wrong
            name = f"grad_out{used + 1}"
            text = (
                f"with a loss that uses output {used + 1} only, {summary}: the other upstream "
                f"gradients are zeros (or None after ctx.set_materialize_grads(False)); "
                f"backward must still use {name}"
            )
            return Failure(run, text, [detail] if detail else [], _state_mistake(text))
    return None


def _reference_grads(
    checked: Checked, run: Run, upstream: tuple[torch.Tensor, ...]
) -> dict[str, torch.Tensor]:
    names = run.grad_names()
    live = [
        a.detach().clone().requires_grad_(p.name in names) if isinstance(a, torch.Tensor) else a
        for a, p in zip(run.args, run.params, strict=True)
    ]
    outputs = evaluate_reference(checked.exercise, live)
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


def _state_mistake(text: str) -> NamedMistake:
    return named("state_outside_ctx", text)


# Each scenario, the words that introduce an error raised in it, and the mistake it suggests.
_SCENARIOS: tuple[tuple[Callable[[Checked, Run], Failure | None], str, str], ...] = (
    (_repeated, f"in {REPEATED_CALLS} calls in a row with fresh values", "state_outside_ctx"),
    (
        _one_graph,
        "with two calls in one graph (backward runs for the second call first)",
        "state_outside_ctx",
    ),
    (
        _one_graph_same_shape,
        "with two calls of the same shape in one graph",
        "state_outside_ctx",
    ),
    (
        _many_in_one_graph,
        f"with up to {LIVE_CALLS} calls alive in one graph",
        "state_outside_ctx",
    ),
    (
        _shared_parameter,
        "with one parameter shared by two calls in one graph",
        "state_outside_ctx",
    ),
    (
        _retained,
        "with two backward passes over one graph (retain_graph=True)",
        "state_outside_ctx",
    ),
    (_accumulated, "with gradients accumulated over two steps", "state_outside_ctx"),
    (
        _updated_in_place,
        "with the same tensors updated in place between two steps (an optimizer's step)",
        "state_outside_ctx",
    ),
    (
        _some_outputs,
        "with a loss that uses some outputs only (the other upstream gradients are zeros, "
        "or None after ctx.set_materialize_grads(False))",
        "missing_upstream",
    ),
    # Last: what the call a billion calls ahead leaves in the file's tables (an entry
    # under a far key) stays out of the other scenarios.
    (
        _far_ahead,
        "with the counters your file keeps moved a billion calls ahead",
        "state_outside_ctx",
    ),
)


def training_calls_stage(checked: Checked) -> StageOutcome:
    run = next((r for r in checked.plan.runs if r.dtype == torch.float64), checked.plan.runs[0])
    failure: Failure | None = None
    error = ""  # an error raised by the learner's code, without the scenario's words
    for step, words, mistake in _SCENARIOS:
        try:
            failure = step(checked, run)
        except LearnerFault as fault:
            text = f"{words}, {fault.message}"
            diagnosis = named(fault.mistake or mistake, text, fault.input)
            failure, error = Failure(run, text, fault.details, diagnosis), fault.message
        if failure is not None:
            break
    success = (
        f"{REPEATED_CALLS} calls in a row with fresh values, two calls in one graph (of "
        f"other shapes and of the same shape) and up to {LIVE_CALLS}, a parameter shared "
        "by two calls, a retained "
        "graph, accumulated gradients, tensors updated in place between steps and the "
        "file's call counters moved a billion calls ahead all give the reference gradients"
        + (", and so do losses that use some outputs only" if checked.exercise.outputs > 1 else "")
    )
    if failure is None:
        return StageOutcome(PASS, success)
    return StageOutcome(
        FAIL, failure.message, list(failure.details), failure.diagnosis, error=error
    )
