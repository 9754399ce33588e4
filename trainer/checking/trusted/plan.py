"""Inputs, upstream gradients and reference results, computed before any learner code runs.

Everything the learner's results are compared with is computed here, while
torch is known to be untouched; the stages then only call the learner's code
and compare.
"""

from __future__ import annotations

import builtins
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
import torch.nn.functional as F

from trainer.checking.trusted import structured
from trainer.checking.trusted.chain import compiled_expression, layer_gradients
from trainer.checking.trusted.numeric import one_sided_slopes
from trainer.spec import Case, CaseValue, Exercise, ScalarParam, TensorParam, Tolerance
from trainer.vocabulary import MISTAKES

DTYPES = (torch.float32, torch.float64)
SMALL = 2_000  # elements: runs larger than this skip gradcheck, kinks and double backward
# Distances from a kink, relative to max(1, |kink|), at which the kink stage
# compares gradients on both sides (in float32 only those float32 can resolve).
# How far from a kink the points close to it are (times the kink's size, when over 1). In
# float64, 1e-9 is below float32's rounding of the kink (a clip of 0.1 kept as a float32
# tensor is 1.5e-9 off) and far above float64's (a comparison written another way).
NEAR_KINK = {
    torch.float64: (1e-1, 1e-2, 1e-3, 1e-4, 1e-6, 1e-9),
    torch.float32: (1e-1, 1e-2, 1e-3),
}
UPSTREAM_DECADES = (-3.0, 3.0)  # domain runs: |upstream| from 1e-3 to 1e3
# Structured runs forgive this many times what rounding the inputs (and the upstream
# gradients) to the run's dtype changes in the float64 answer: a right answer in float32
# is only as exact as its inputs are, and a kink or a tie the values sit on is forgiven.
ROUNDING_FACTOR = 48
ROUNDING_DIRECTIONS = 2  # random directions per input: one could miss what matters
ROUNDING_FLOOR = 1 / 8  # of the tensor's mean change: what any element is forgiven at least
TIE_ELEMENTS = 256  # inputs larger than this are not searched for windows to tie
DTYPE_NAMES = {torch.float32: "float32", torch.float64: "float64"}


@dataclass(frozen=True)
class Run:
    """One call of the function: a case in one dtype, with what it should produce."""

    case: Case
    dtype: torch.dtype
    params: tuple[TensorParam | ScalarParam, ...]
    args: tuple[object, ...]  # pristine, never handed to the learner
    expected_outputs: tuple[torch.Tensor, ...]
    upstream: tuple[torch.Tensor, ...]  # random, never all ones
    expected_grads: dict[str, torch.Tensor]
    tolerance: Tolerance
    # A second random upstream gradient: a backward that ignores grad_output
    # gives the same answer for both.
    upstream_other: tuple[torch.Tensor, ...]
    expected_grads_other: dict[str, torch.Tensor]
    # Extra absolute tolerance per element (domain runs): torch's own float32
    # error against float64, and rounding at the scale of the whole tensor.
    outputs_slack: tuple[torch.Tensor, ...] = ()
    grads_slack: dict[str, torch.Tensor] = field(default_factory=dict)
    # Wrong gradients known by name, for the diagnosis: input -> mistake -> (words, tensor).
    # input -> mistake -> each (words, gradient) the mistake gives (one per output a
    # backward could ignore, say)
    known_wrong: dict[str, dict[str, list[tuple[str, torch.Tensor]]]] = field(default_factory=dict)
    note: str = ""  # what is special about the values (structured runs), for the label
    # The reference's gradient at each layer of the spec's chain (``intermediates:``), in
    # its order: float64 runs of the backward stage only (see trusted.intermediates).
    layer_grads: tuple[torch.Tensor, ...] = ()

    @property
    def numel(self) -> int:
        """Elements in all tensor arguments: what a stage's cost grows with."""
        return elements(self.args)

    @property
    def ones(self) -> tuple[torch.Tensor, ...]:
        # An integer output (sort's indices) takes no gradient: autograd hands zeros.
        return tuple(
            torch.ones_like(u) if u.is_floating_point() else torch.zeros_like(u)
            for u in self.upstream
        )

    @property
    def label(self) -> str:
        text = f"{self.case.describe()} in {DTYPE_NAMES[self.dtype]}"
        return f"{text}, {self.note}" if self.note else text

    def values_text(self) -> str:
        """The inputs written out, for a stability probe."""
        parts = []
        for param, value in zip(self.params, self.args, strict=True):
            shown = value.tolist() if isinstance(value, torch.Tensor) else value
            parts.append(f"{param.name} = {shown}")
        return ", ".join(parts) + f" ({DTYPE_NAMES[self.dtype]})"

    def fresh_args(self) -> list[object]:
        """Copies of the inputs for one learner call, so in-place edits stay local."""
        fresh: list[object] = []
        for param, value in zip(self.params, self.args, strict=True):
            if isinstance(param, TensorParam) and isinstance(value, torch.Tensor):
                fresh.append(value.detach().clone().requires_grad_(param.requires_grad))
            else:
                fresh.append(value)
        return fresh

    def grad_names(self) -> list[str]:
        return [p.name for p in self.params if isinstance(p, TensorParam) and p.requires_grad]


@dataclass(frozen=True)
class KinkPoint:
    """One element of a tensor input set exactly on a kink."""

    param: str
    flat_index: int
    value: float
    expression: str  # how the spec names the kink, e.g. "clip_val"
    low: float  # the subgradient interval: any slope in [low, high] is right
    high: float


@dataclass(frozen=True)
class KinkRun:
    run: Run  # args hold kink values at the kink points; expected values elsewhere
    points: tuple[KinkPoint, ...]


@dataclass(frozen=True)
class Plan:
    runs: tuple[Run, ...]
    kink_runs: tuple[KinkRun, ...] = ()
    stability_runs: tuple[Run, ...] = ()
    # Fresh values of one shape, for calls in a row as a training loop makes them.
    state_runs: tuple[Run, ...] = ()
    # The first case's shapes with the other arguments of later cases (a stride, a
    # count_include_pad, a p), where the reference takes them: calls in a row alternate
    # them with state_runs, as training alternates layers of one shape.
    sibling_runs: tuple[Run, ...] = ()
    # Fresh values of the first case, one set per call alive in one graph: no table of
    # recent calls, of any size, finds a call's values in another call's slot.
    live_runs: tuple[Run, ...] = ()
    # Values across each tensor's domain on a log scale, upstream gradients from
    # 1e-3 to 1e3: every case, in both dtypes; then the structured values of
    # ``structured`` (offsets, zeros, bounds; ties where every output is a float).
    domain_runs: tuple[Run, ...] = ()
    # Ties at every pair of positions of each window, for exercises with an index
    # output: which tied element forward reports is its own choice, so the stage of
    # non-differentiable outputs checks that backward follows it.
    tie_runs: tuple[Run, ...] = ()
    # Each output element depends on the same element of each input only: the
    # learner's gradient can be drawn as a slope against the input, over this run
    # of evenly spaced inputs.
    elementwise: bool = False
    picture_run: Run | None = None

    @property
    def gradcheck_runs(self) -> tuple[Run, ...]:
        """Float64 runs small enough for a numerical Jacobian, where the reference is
        finite: finite differences of a nan (a mean over no counted row) are nan, whatever
        backward returns, and would fail a right one."""
        return tuple(
            r for r in self.runs if r.dtype == torch.float64 and r.numel <= SMALL and _finite(r)
        )


def _kink_margin(param: TensorParam) -> float:
    # Far larger than gradcheck's eps and float32 rounding, small enough to keep
    # the distribution of inputs close to uniform.
    return max(1e-2 * (param.high - param.low), 1e-3)


def _kink_points(param: TensorParam, scalars: dict[str, CaseValue]) -> list[float]:
    env = {"math": math, "__builtins__": {}}
    return [float(eval(expr, env, dict(scalars))) for expr in param.kinks]


def int_high(param: TensorParam, case: Case) -> int:
    """The exclusive upper bound of an int tensor: a number, or an expression over the case
    (tensor names stand for objects with a ``.shape``, scalars for their values)."""
    if param.high_expression is None:
        return int(param.high)
    scope: dict[str, object] = {
        name: SimpleNamespace(shape=tuple(value)) if isinstance(value, tuple) else value
        for name, value in case.values.items()
    }
    return int(eval(param.high_expression, {"math": math, "__builtins__": {}}, scope))


def kink_values(exercise: Exercise, run: Run) -> dict[str, list[tuple[float, str]]]:
    """Each kinked input's kinks in this run: (value, the spec's expression)."""
    scalars = {
        p.name: run.case.values[p.name] for p in exercise.parameters if isinstance(p, ScalarParam)
    }
    return {
        p.name: list(zip(_kink_points(p, scalars), p.kinks, strict=True))
        for p in exercise.parameters
        if isinstance(p, TensorParam) and p.kinks
    }


def _off_kinks(
    param: TensorParam, values: torch.Tensor, scalars: dict[str, CaseValue]
) -> torch.Tensor:
    """Values closer to a declared kink than the margin, moved to twice the margin."""
    margin = _kink_margin(param)
    for kink in _kink_points(param, scalars):
        distance = values - kink
        near = distance.abs() < margin
        direction = torch.where(distance >= 0, 1.0, -1.0).to(values.dtype)
        values = torch.where(near, kink + direction * 2 * margin, values)
    return values


def make_tensor(
    param: TensorParam,
    shape: Sequence[int],
    scalars: dict[str, CaseValue],
    generator: torch.Generator,
    high: int | None = None,
) -> torch.Tensor:
    """Uniform values in [low, high], moved away from the declared kinks; ints in [low, high)."""
    if not param.is_float:
        top = int(param.high) if high is None else high
        return torch.randint(int(param.low), top, tuple(shape), generator=generator)
    values = torch.empty(tuple(shape), dtype=torch.float64)
    values.uniform_(param.low, param.high, generator=generator)
    return _off_kinks(param, values, scalars)


def weighted_sum(outputs: Sequence[torch.Tensor], upstream: Sequence[torch.Tensor]) -> torch.Tensor:
    """The scalar whose gradient is the vector-Jacobian product with ``upstream``.

    The same numbers as ``torch.autograd.grad(outputs, inputs, upstream)``, without
    the explicit ``grad_outputs``, whose first use imports sympy (0.5 s, tens of MiB).
    """
    terms = [(o * u).sum() for o, u in zip(outputs, upstream, strict=True) if o.is_floating_point()]
    return torch.stack(terms).sum()


def _stated_gradients(
    exercise: Exercise,
    args: Sequence[object],
    upstream: tuple[torch.Tensor, ...],
    expressions: Mapping[str, str] | None = None,
) -> dict[str, torch.Tensor]:
    """The spec's own gradient expressions, where autograd of the reference is not the
    target (or, with ``expressions``, the wrong gradients of a declared mistake)."""
    expressions = exercise.expected_gradient if expressions is None else expressions
    if not expressions:
        return {}
    env = {"torch": torch, "F": F, "math": math, "__builtins__": builtins}
    local: dict[str, object] = {
        name: a.detach() if isinstance(a, torch.Tensor) else a
        for name, a in zip(exercise.param_names, args, strict=True)
    }
    local["grad_output"] = upstream[0]
    local["grad_outputs"] = upstream
    stated = {}
    for name, expression in expressions.items():
        value = eval(compiled_expression(expression), env, local)
        if not isinstance(value, torch.Tensor):
            raise ValueError(f"expected_gradient.{name} does not give a tensor")
        stated[name] = value.detach()
    return stated


def differentiable(
    outputs: Sequence[torch.Tensor], upstream: Sequence[torch.Tensor | None]
) -> tuple[list[torch.Tensor], list[torch.Tensor | None]]:
    """The outputs autograd differentiates, with their upstream gradients: an integer
    output (sort's indices) takes no gradient (autograd hands backward zeros for it)."""
    pairs = [(o, u) for o, u in zip(outputs, upstream, strict=True) if o.is_floating_point()]
    return [o for o, _ in pairs], [u for _, u in pairs]


def evaluate_reference(exercise: Exercise, args: Sequence[object]) -> tuple[torch.Tensor, ...]:
    env = {"torch": torch, "F": F, "math": math, "__builtins__": builtins}
    local = dict(zip(exercise.param_names, args, strict=True))
    result = eval(compiled_expression(exercise.reference), env, local)
    outputs = tuple(result) if isinstance(result, tuple | list) else (result,)
    if len(outputs) != exercise.outputs:
        raise ValueError(
            f"{exercise.source}: reference gives {len(outputs)} outputs, spec says {exercise.outputs}"
        )
    return outputs


STATE_VALUE_SETS = 6
LIVE_CALLS = 64  # calls alive in one graph at once, as a deep network's layers are


def _case_values(exercise: Exercise, case: Case, generator: torch.Generator) -> list[object]:
    """Fresh random arguments for ``case`` (tensors in float64)."""
    scalars = {
        p.name: case.values[p.name] for p in exercise.parameters if isinstance(p, ScalarParam)
    }
    base: list[object] = []
    for param in exercise.parameters:
        value = case.values[param.name]
        if isinstance(param, TensorParam):
            assert isinstance(value, tuple)
            base.append(make_tensor(param, value, scalars, generator, int_high(param, case)))
        else:
            base.append(value)
    return base


def build_plan(exercise: Exercise, seed: int) -> Plan:
    generator = torch.Generator().manual_seed(seed)
    runs = [run for case in exercise.cases for run in _case_runs(exercise, case, generator)]
    kink_runs = tuple(
        k for run in runs if run.numel <= SMALL for k in _kink_run(exercise, run, generator)
    )
    small = [c for c in exercise.cases if _case_numel(c) <= SMALL]  # values, not sizes
    domain_runs = tuple(
        d
        for case in small
        for dtype in DTYPES
        for d in _domain_run(exercise, case, dtype, generator)
    )
    elementwise = _is_elementwise(exercise, runs[0])
    # An element-wise op sees values, not rows: the largest small case carries them all.
    structured_cases = [max(small, key=_case_numel)] if elementwise and small else small
    domain_runs += tuple(
        r for case in structured_cases for r in _structured_runs(exercise, case, generator)
    )
    if elementwise:
        # Draws of their own, so that every run above stays as it was.
        apart = torch.Generator().manual_seed((seed * 7919 + 1) % 2**63)
        domain_runs += tuple(
            replace(r, note="a rank no case has")
            for r in _case_runs(exercise, _unseen_rank(exercise, apart), apart)
        )
        domain_runs += tuple(_grid_runs(exercise, apart))
    tie_runs = _tie_runs(exercise, small, generator)
    indices = any(not o.is_floating_point() for o in runs[0].expected_outputs)
    if not indices:
        domain_runs, tie_runs = domain_runs + tie_runs, ()
    state_runs = _first_case_runs(exercise, STATE_VALUE_SETS, generator)
    sibling_runs = _sibling_runs(exercise, generator)  # last: the runs above stay as they were
    live = torch.Generator().manual_seed((seed * 7919 + 2) % 2**63)  # draws of their own
    live_runs = _first_case_runs(exercise, LIVE_CALLS, live)
    return Plan(
        elementwise=elementwise,
        picture_run=_picture_run(exercise, generator) if elementwise else None,
        runs=tuple(runs),
        kink_runs=kink_runs,
        state_runs=state_runs,
        sibling_runs=sibling_runs,
        live_runs=live_runs,
        domain_runs=domain_runs,
        tie_runs=tie_runs,
        stability_runs=tuple(
            _stability_run(exercise, index, generator) for index in range(len(exercise.stability))
        ),
    )


def _first_case_runs(exercise: Exercise, count: int, generator: torch.Generator) -> tuple[Run, ...]:
    """``count`` float64 runs of the first case, each with fresh values."""
    case = exercise.cases[0]
    return tuple(
        _run(
            exercise, case, torch.float64, tuple(_case_values(exercise, case, generator)), generator
        )
        for _ in range(count)
    )


def _case_runs(exercise: Exercise, case: Case, generator: torch.Generator) -> list[Run]:
    """The case's runs: float32, and float64 unless the case is large."""
    base = _case_values(exercise, case, generator)
    # The float64 run is the truth for the float32 one: same inputs, same upstream,
    # and the float32 comparison forgives twice torch's own float32 error (a long
    # sum in float32 is only so exact, whoever computes it).
    wide = _run(exercise, case, torch.float64, _cast(base, torch.float64), generator)
    narrow = _run(
        exercise, case, torch.float32, _cast(base, torch.float32), generator, wide.upstream
    )
    # A large case is there to catch code that depends on size: once, in float32,
    # is enough (its float64 run only serves as the truth).
    large = elements(base) > SMALL
    return [_with_slack(exercise, narrow, generator, truth=wide)] + (
        [] if large else [_with_layer_grads(exercise, wide)]
    )


def _unseen_rank(exercise: Exercise, generator: torch.Generator) -> Case:
    """An element-wise op takes a tensor of any shape: the first case with its tensors of
    the output's shape made of a rank no case has, sizes drawn. (Not 0-dim: a right
    backward that loops over rows or vmaps over the first dimension is right for every
    tensor a network hands it.)"""
    first = exercise.cases[0]
    tensors = [p.name for p in exercise.parameters if isinstance(p, TensorParam)]
    shape = next(
        first.values[p.name]
        for p in exercise.parameters
        if isinstance(p, TensorParam) and p.requires_grad
    )
    ranks = [len(v) for c in exercise.cases for v in c.values.values() if isinstance(v, tuple)]
    unseen = tuple(int(n) for n in torch.randint(2, 4, (1 + max(ranks),), generator=generator))
    return Case(
        {
            name: unseen if name in tensors and value == shape else value
            for name, value in first.values.items()
        }
    )


GRID_POINTS = 101


def _grid_runs(exercise: Exercise, generator: torch.Generator) -> list[Run]:
    """Every float tensor evenly spaced over [low, high], off the kinks: the inputs one
    plots a slope on, in both dtypes."""
    case, base = _evenly_spaced(exercise, GRID_POINTS, generator, off_kinks=True)
    runs = [
        _finite_structured(exercise, case, dtype, base, generator, "evenly spaced values")
        for dtype in DTYPES
    ]
    return [r for r in runs if r is not None]


SIBLINGS = 4  # the most sibling runs a plan holds


def _sibling_runs(exercise: Exercise, generator: torch.Generator) -> tuple[Run, ...]:
    """Float64 runs of the first case's tensor shapes with each later case's other
    arguments, one per distinct set of them, where the reference takes them (a set that
    does not fit these shapes, a padding larger than the plane, is skipped). A backward
    that caches by shape alone gives the first case's answer to its siblings."""
    if not exercise.cases:
        return ()
    first = exercise.cases[0]
    scalars = [p.name for p in exercise.parameters if isinstance(p, ScalarParam)]
    seen = {tuple(repr(first.values[name]) for name in scalars)}
    runs: list[Run] = []
    for case in exercise.cases[1:]:
        key = tuple(repr(case.values[name]) for name in scalars)
        if key in seen:
            continue
        seen.add(key)
        sibling = Case({**first.values, **{name: case.values[name] for name in scalars}})
        try:
            values = tuple(_case_values(exercise, sibling, generator))
            runs.append(_run(exercise, sibling, torch.float64, values, generator))
        except Exception:  # not arguments these shapes take
            continue
        if len(runs) == SIBLINGS:
            break
    return tuple(runs)


def _with_layer_grads(exercise: Exercise, run: Run) -> Run:
    """``run`` with the reference's gradient at each layer of the spec's chain, if any."""
    if exercise.intermediates is None:
        return run
    grads = layer_gradients(
        exercise,
        exercise.intermediates,
        run.args,
        run.upstream,
        run.expected_outputs,
        None if exercise.expected_gradient else run.expected_grads,
    )
    return replace(run, layer_grads=grads)


PICTURE_POINTS = 241


def _picture_run(exercise: Exercise, generator: torch.Generator) -> Run:
    """The first case's arguments with every float tensor evenly spaced over [low, high]."""
    case, args = _evenly_spaced(exercise, PICTURE_POINTS, generator)
    return _run(exercise, case, torch.float64, tuple(args), generator)


def _evenly_spaced(
    exercise: Exercise, points: int, generator: torch.Generator, off_kinks: bool = False
) -> tuple[Case, list[object]]:
    """The first case's scalars, every float tensor ``points`` values evenly spaced over
    [low, high] (moved off its kinks with ``off_kinks``), every int tensor drawn."""
    case = exercise.cases[0]
    scalars = {
        p.name: case.values[p.name] for p in exercise.parameters if isinstance(p, ScalarParam)
    }
    args: list[object] = []
    values: dict[str, CaseValue] = {}
    for param in exercise.parameters:
        if isinstance(param, TensorParam):
            values[param.name] = (points,)
            if param.is_float:
                grid = torch.linspace(param.low, param.high, points, dtype=torch.float64)
                args.append(_off_kinks(param, grid, scalars) if off_kinks else grid)
            else:
                args.append(make_tensor(param, (points,), {}, generator, int_high(param, case)))
        else:
            values[param.name] = case.values[param.name]
            args.append(case.values[param.name])
    return Case(values=values), args


def _is_elementwise(exercise: Exercise, run: Run) -> bool:
    """One output, shaped like every input that needs a gradient, and a nudge of one
    input element moves that output element alone."""
    if exercise.outputs != 1 or run.expected_outputs[0].numel() < 2:
        return False
    shape = run.expected_outputs[0].shape
    positions = [
        i
        for i, (p, a) in enumerate(zip(run.params, run.args, strict=True))
        if isinstance(p, TensorParam) and p.requires_grad
    ]
    for position in positions:
        value = run.args[position]
        if not isinstance(value, torch.Tensor) or value.shape != shape:
            return False
        nudged = list(run.args)
        moved = value.clone().to(torch.float64)
        moved.reshape(-1)[0] += 1e-3
        nudged[position] = moved
        nudged = [
            a.to(torch.float64) if isinstance(a, torch.Tensor) and a.is_floating_point() else a
            for a in nudged
        ]
        with torch.no_grad():
            base = [
                a.to(torch.float64) if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                for a in run.args
            ]
            change = evaluate_reference(exercise, nudged)[0] - evaluate_reference(exercise, base)[0]
        if bool((change.reshape(-1)[1:] != 0).any()):
            return False
    return True


def _kink_run(exercise: Exercise, run: Run, generator: torch.Generator) -> list[KinkRun]:
    """The run's inputs with the first elements of each kinked tensor set exactly on its
    kinks, and the next ones close to them on both sides, at several distances."""
    scalars = {
        p.name: run.case.values[p.name] for p in exercise.parameters if isinstance(p, ScalarParam)
    }
    args = [a.clone() if isinstance(a, torch.Tensor) else a for a in run.args]
    points: list[KinkPoint] = []
    for position, param in enumerate(exercise.parameters):
        tensor = args[position]
        if (
            not isinstance(param, TensorParam)
            or not param.kinks
            or not isinstance(tensor, torch.Tensor)
        ):
            continue
        kinks = list(zip(param.kinks, _kink_points(param, scalars), strict=True))
        flat = tensor.reshape(-1)
        for flat_index, (expression, value) in enumerate(kinks[: tensor.numel()]):
            if float(torch.tensor(value, dtype=run.dtype)) != value:
                # A kink this dtype cannot hold (a clip of 0.3 in float32): no element can
                # sit on it, and either side's convention is right at its rounding.
                continue
            flat[flat_index] = value
            low, high = _one_sided_slopes(exercise, args, position, flat_index)
            points.append(KinkPoint(param.name, flat_index, value, expression, low, high))
        near = [
            point
            for _, value in kinks
            for distance in NEAR_KINK[run.dtype]
            for side in (1.0, -1.0)
            if _nearest(point := value + side * distance * max(1.0, abs(value)), kinks) == value
        ]
        start = len(kinks)
        for offset, value in enumerate(near[: max(tensor.numel() - start, 0)]):
            flat[start + offset] = value
    if not points:
        return []
    return [
        KinkRun(
            run=_run(exercise, run.case, run.dtype, tuple(args), generator), points=tuple(points)
        )
    ]


def _nearest(point: float, kinks: list[tuple[str, float]]) -> float:
    """The kink ``point`` is closest to: a point close to one kink that lands on another
    (0 + 0.1 with a clip of 0.1) is that other's, not a point next to a kink."""
    return min((value for _, value in kinks), key=lambda value: abs(point - value))


def _one_sided_slopes(
    exercise: Exercise, args: list[object], position: int, flat_index: int
) -> tuple[float, float]:
    """The left and right derivatives of an element-wise function at one element, in order
    (in float64 whatever the run's dtype: the step is below float32's resolution)."""
    wide = [
        a.to(torch.float64) if isinstance(a, torch.Tensor) and a.is_floating_point() else a
        for a in args
    ]
    point = wide[position]
    assert isinstance(point, torch.Tensor)

    def output(moved: torch.Tensor) -> torch.Tensor:
        call = list(wide)
        call[position] = moved
        with torch.no_grad():
            return evaluate_reference(exercise, call)[0]

    return one_sided_slopes(output, point, flat_index, 1e-7)


def _log_scale(
    param: TensorParam,
    shape: Sequence[int],
    scalars: dict[str, CaseValue],
    generator: torch.Generator,
) -> torch.Tensor:
    """Values across the parameter's domain with log-uniform magnitudes (1e-3 to the
    largest bound), the bounds themselves included, kept off the kinks."""
    assert param.domain is not None
    lowest, highest = param.domain
    top = max(abs(lowest), abs(highest))
    count = math.prod(shape)
    decades = torch.empty(count, dtype=torch.float64).uniform_(
        math.log10(min(1e-3, top)), math.log10(top), generator=generator
    )
    magnitudes = torch.pow(10.0, decades)
    if lowest >= 0:
        signs = torch.ones(count, dtype=torch.float64)
    elif highest <= 0:
        signs = -torch.ones(count, dtype=torch.float64)
    else:
        signs = torch.randint(0, 2, (count,), generator=generator).to(torch.float64) * 2 - 1
    values = (signs * magnitudes).clamp(lowest, highest)
    if count >= 2:
        values[0], values[1] = lowest, highest
    values = values[torch.randperm(count, generator=generator)]
    return _off_kinks(param, values, scalars).reshape(tuple(shape))


def _log_upstream(
    outputs: tuple[torch.Tensor, ...], generator: torch.Generator
) -> tuple[torch.Tensor, ...]:
    """Upstream gradients with magnitudes from 1e-3 to 1e3 and random signs."""
    low, high = UPSTREAM_DECADES
    upstream = []
    for output in outputs:
        if not output.is_floating_point():  # an integer output takes no gradient
            upstream.append(torch.zeros(output.shape, dtype=torch.float64))
            continue
        decades = torch.empty(output.shape, dtype=torch.float64).uniform_(
            low, high, generator=generator
        )
        signs = torch.randint(0, 2, output.shape, generator=generator).to(torch.float64) * 2 - 1
        upstream.append(signs * torch.pow(10.0, decades))
    return tuple(upstream)


def _finite(run: Run) -> bool:
    return all(bool(o.isfinite().all()) for o in run.expected_outputs) and all(
        bool(g.isfinite().all()) for g in run.expected_grads.values()
    )


def _domain_run(
    exercise: Exercise, case: Case, dtype: torch.dtype, generator: torch.Generator
) -> list[Run]:
    """One run across the domain (shrunk by decades where torch itself overflows in
    this dtype), with wide upstream gradients and the slack the comparison allows."""
    scalars = {
        p.name: case.values[p.name] for p in exercise.parameters if isinstance(p, ScalarParam)
    }
    shrink = 1.0
    for _ in range(4):
        base: list[object] = []
        for param in exercise.parameters:
            value = case.values[param.name]
            if isinstance(param, TensorParam) and param.is_float and param.domain is not None:
                assert isinstance(value, tuple)
                lowest, highest = param.domain
                narrowed = replace(
                    param,
                    domain=(min(lowest / shrink, param.low), max(highest / shrink, param.high)),
                )
                base.append(_log_scale(narrowed, value, scalars, generator))
            elif isinstance(param, TensorParam):
                assert isinstance(value, tuple)
                base.append(make_tensor(param, value, scalars, generator, int_high(param, case)))
            else:
                base.append(value)
        args = tuple(
            a.to(dtype) if isinstance(a, torch.Tensor) and a.is_floating_point() else a
            for a in base
        )
        with torch.no_grad():
            probe = evaluate_reference(
                exercise, [a.detach() if isinstance(a, torch.Tensor) else a for a in args]
            )
        upstream = _log_upstream(probe, generator)
        run = _run(exercise, case, dtype, args, generator, upstream=upstream)
        if _finite(run):
            return [_with_slack(exercise, run, generator)]
        shrink *= 10.0
    return []


def _structured_runs(exercise: Exercise, case: Case, generator: torch.Generator) -> list[Run]:
    """The case with each of ``structured``'s value sets, in the dtypes where each matters,
    shrunk by decades where the reference itself is not finite in that dtype."""
    scalars = {
        p.name: case.values[p.name] for p in exercise.parameters if isinstance(p, ScalarParam)
    }
    floats = []
    for position, param in enumerate(exercise.parameters):
        value = case.values[param.name]
        if isinstance(param, TensorParam) and param.is_float and isinstance(value, tuple):
            floats.append((position, param, value))

    def random_values(param: TensorParam, shape: Sequence[int]) -> torch.Tensor:
        if param.domain is not None:
            return _log_scale(param, shape, scalars, generator)
        return make_tensor(param, shape, scalars, generator)

    runs: list[Run] = []
    for note, dtypes, build in structured.value_sets(floats, random_values, generator):
        base: list[object] = []
        for position, param in enumerate(exercise.parameters):
            value = case.values[param.name]
            if isinstance(param, TensorParam) and param.is_float:
                assert isinstance(value, tuple)
                base.append(_off_kinks(param, build(position, param, value), scalars))
            elif isinstance(param, TensorParam):
                assert isinstance(value, tuple)
                base.append(make_tensor(param, value, scalars, generator, int_high(param, case)))
            else:
                base.append(value)
        for dtype in dtypes:
            run = _finite_structured(exercise, case, dtype, base, generator, note)
            if run is not None:
                runs.append(run)
    return runs


def _finite_structured(
    exercise: Exercise,
    case: Case,
    dtype: torch.dtype,
    base: list[object],
    generator: torch.Generator,
    note: str,
) -> Run | None:
    values = list(base)
    for _ in range(4):
        run = _run(exercise, case, dtype, _cast(values, dtype), generator)
        if _finite(run):
            return _with_rounding_slack(exercise, replace(run, note=note), generator)
        values = [
            v / 10 if isinstance(v, torch.Tensor) and v.is_floating_point() else v for v in values
        ]
    return None


def _reference_at(
    exercise: Exercise, args: Sequence[object], upstream: Sequence[torch.Tensor]
) -> tuple[tuple[torch.Tensor, ...], dict[str, torch.Tensor]]:
    """The reference's outputs and gradients (float64 in, float64 out)."""
    live = [
        a.detach().clone().requires_grad_(p.requires_grad)
        if isinstance(p, TensorParam) and isinstance(a, torch.Tensor)
        else a
        for p, a in zip(exercise.parameters, args, strict=True)
    ]
    outputs = evaluate_reference(exercise, live)
    names = [p.name for p in exercise.parameters if isinstance(p, TensorParam) and p.requires_grad]
    wanting = [a for a, p in zip(live, exercise.parameters, strict=True) if p.name in names]
    grads = torch.autograd.grad(
        weighted_sum(outputs, upstream),
        [w for w in wanting if isinstance(w, torch.Tensor)],
        allow_unused=True,
    )
    computed = {
        name: (g if g is not None else torch.zeros_like(w)).detach()
        for name, g, w in zip(names, grads, wanting, strict=True)
        if isinstance(w, torch.Tensor)
    }
    stated = _stated_gradients(exercise, live, tuple(upstream))
    return tuple(o.detach() for o in outputs), {**computed, **stated}


def _with_rounding_slack(exercise: Exercise, run: Run, generator: torch.Generator) -> Run | None:
    """The run's usual slack, plus ROUNDING_FACTOR times torch's own error in the run's
    dtype plus what moving the elements of one input (or of the upstream gradients) by a
    rounding step of that dtype, both ways along a random direction, changes in the
    float64 answer, summed over the inputs (one at a time: moves of two factors of a
    product could cancel). None when such a move
    changes an integer output: tied indices are forward's choice, which the stage of
    indices checks."""
    run = _with_slack(exercise, run, generator)
    eps = torch.finfo(run.dtype).eps
    wide = list(_cast(run.args, torch.float64))
    upstream = [u.to(torch.float64) for u in run.upstream]
    outputs, grads = _reference_at(exercise, wide, upstream)
    # torch's own error in this dtype: large where intermediates are (scores in the
    # thousands), which moving the inputs does not show.
    total_outputs = [
        (o.to(torch.float64) - w).abs() if o.is_floating_point() else torch.zeros_like(w)
        for o, w in zip(run.expected_outputs, outputs, strict=True)
    ]
    total_grads = {
        name: (run.expected_grads[name].to(torch.float64) - g).abs() for name, g in grads.items()
    }
    values = [*wide, *upstream]
    movable = [
        i for i, v in enumerate(values) if isinstance(v, torch.Tensor) and v.is_floating_point()
    ]
    for index, _ in itertools.product(movable, range(ROUNDING_DIRECTIONS)):
        value = values[index]
        assert isinstance(value, torch.Tensor)
        direction = torch.randint(0, 2, value.shape, generator=generator).to(torch.float64) * 2 - 1
        param = run.params[index] if index < len(wide) else None
        floor = max(abs(param.low), abs(param.high)) if isinstance(param, TensorParam) else 0.0
        step = direction * eps * (value.abs() + floor)
        worst_outputs = [torch.zeros_like(o) for o in total_outputs]
        worst_grads = {name: torch.zeros_like(g) for name, g in total_grads.items()}
        for sign in (1.0, -1.0):
            moved = list(values)
            # Within the input's domain: a target of exactly 0 moved to -eps makes a
            # reference's t·log t nan there, and a nan allowance fails any answer.
            moved[index] = _in_domain(value + sign * step, param)
            got_outputs, got_grads = _reference_at(
                exercise,
                moved[: len(wide)],
                moved[len(wide) :],  # type: ignore[arg-type]
            )
            for position, (was, now) in enumerate(zip(outputs, got_outputs, strict=True)):
                if not was.is_floating_point():
                    if not torch.equal(was, now):
                        return None
                    continue
                worst_outputs[position] = torch.maximum(worst_outputs[position], (now - was).abs())
            for name, now in got_grads.items():
                worst_grads[name] = torch.maximum(worst_grads[name], (now - grads[name]).abs())
        total_outputs = [t + w for t, w in zip(total_outputs, worst_outputs, strict=True)]
        total_grads = {name: t + worst_grads[name] for name, t in total_grads.items()}

    def widened(slack: torch.Tensor, worst: torch.Tensor) -> torch.Tensor:
        # One element's moves may cancel by chance while rounding at the inputs' scale
        # reaches every element (exp(x - logsumexp(x)) at x near 600 is off by a factor
        # common to the row): each element is forgiven at least a share of the tensor's mean.
        worst = worst.to(torch.float64)  # an integer output's is zeros
        floor = worst.mean() * ROUNDING_FLOOR if worst.numel() else worst.new_zeros(())
        return slack.to(torch.float64) + ROUNDING_FACTOR * torch.maximum(worst, floor)

    return replace(
        run,
        outputs_slack=tuple(
            widened(s, w) for s, w in zip(run.outputs_slack, total_outputs, strict=True)
        ),
        grads_slack={name: widened(s, total_grads[name]) for name, s in run.grads_slack.items()},
    )


def _in_domain(value: torch.Tensor, param: object) -> torch.Tensor:
    """``value`` kept inside the parameter's declared domain (if it declares one)."""
    domain = getattr(param, "domain", None)
    if not isinstance(param, TensorParam) or domain is None:
        return value
    return value.clamp(min=domain[0], max=domain[1])


def _tie_runs(
    exercise: Exercise, cases: Sequence[Case], generator: torch.Generator
) -> tuple[Run, ...]:
    """Float64 runs with ties at every pair of positions of each window an output chooses
    from (``structured.windows``), for each float input such windows exist for."""
    runs: list[Run] = []
    covered: set[tuple[int, ...]] = set()
    for case in cases:
        base = _case_values(exercise, case, generator)
        for position, param in enumerate(exercise.parameters):
            x = base[position]
            if not (
                isinstance(param, TensorParam)
                and param.is_float
                and param.requires_grad
                and isinstance(x, torch.Tensor)
                and 2 <= x.numel() <= TIE_ELEMENTS
            ):
                continue
            if not _some_gradient_zero(exercise, base, position, generator):
                continue

            def first_output(
                moved: torch.Tensor, at: int = position, values: list[object] = base
            ) -> torch.Tensor:
                call = list(values)
                call[at] = moved
                with torch.no_grad():
                    return evaluate_reference(exercise, call)[0]

            found = structured.windows(first_output, x)
            if not found:
                continue
            sets = structured.tie_sets(found, param.low, param.high, x.numel(), generator, covered)
            for number, flat in enumerate(sets, start=1):
                args = list(base)
                args[position] = flat.reshape(x.shape)
                run = _run(exercise, case, torch.float64, tuple(args), generator)
                note = (
                    f"{param.name} nearly tied (the later of each pair larger by a billionth)"
                    if number == len(sets) and number > 1
                    else f"{param.name} tied at pairs of positions of its windows"
                )
                runs.append(_with_slack(exercise, replace(run, note=note), generator))
    return tuple(runs)


def _some_gradient_zero(
    exercise: Exercise, base: list[object], position: int, generator: torch.Generator
) -> bool:
    """An exact zero in one input's gradient at random values: the mark of an output that
    chooses some inputs and drops others (cheap to find; windows are not)."""
    outputs = evaluate_reference(exercise, base)
    upstream = [
        torch.randn(o.shape, dtype=torch.float64, generator=generator)
        if o.is_floating_point()
        else torch.zeros(o.shape, dtype=torch.float64)
        for o in outputs
    ]
    _, grads = _reference_at(exercise, base, upstream)
    gradient = grads.get(exercise.parameters[position].name)
    return gradient is not None and bool((gradient == 0).any())


def _slack_for(got: torch.Tensor, truth: torch.Tensor | None) -> torch.Tensor:
    """What the comparison forgives: rounding at the scale of the whole tensor (one
    number) plus, for a float32 run, twice torch's own error against float64 (per
    element, kept in float32 to halve what a large run holds)."""
    scale = float(got.detach().abs().max()) if got.numel() else 0.0
    eps = torch.finfo(got.dtype).eps if got.is_floating_point() else 0.0
    rounding = torch.tensor(16 * eps * math.sqrt(max(got.numel(), 1)) * scale)
    if truth is None:
        return rounding.to(torch.float64)
    own = 2 * (got.detach().to(torch.float64) - truth.detach()).abs()
    return (own + rounding).to(torch.float32)


def elements(values: Sequence[object]) -> int:
    """Elements in all tensor arguments: what a run's cost grows with."""
    return sum(int(a.numel()) for a in values if isinstance(a, torch.Tensor))


def _case_numel(case: Case) -> int:
    return sum(math.prod(v) for v in case.values.values() if isinstance(v, tuple))


def _cast(values: Sequence[object], dtype: torch.dtype) -> tuple[object, ...]:
    return tuple(
        a.to(dtype) if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in values
    )


def _with_slack(
    exercise: Exercise, run: Run, generator: torch.Generator, truth: Run | None = None
) -> Run:
    if truth is None and run.dtype != torch.float64:
        wide = tuple(
            a.to(torch.float64) if isinstance(a, torch.Tensor) and a.is_floating_point() else a
            for a in run.args
        )
        truth = _run(exercise, run.case, torch.float64, wide, generator, upstream=run.upstream)
    return replace(
        run,
        outputs_slack=tuple(
            _slack_for(o, truth.expected_outputs[i] if truth else None)
            for i, o in enumerate(run.expected_outputs)
        ),
        grads_slack={
            name: _slack_for(g, truth.expected_grads[name] if truth else None)
            for name, g in run.expected_grads.items()
        },
    )


def _stability_run(exercise: Exercise, index: int, generator: torch.Generator) -> Run:
    probe = exercise.stability[index]
    dtype = torch.float32 if probe.dtype == "float32" else torch.float64
    args = tuple(
        torch.tensor(probe.values[p.name], dtype=dtype if p.is_float else torch.int64)
        if isinstance(p, TensorParam)
        else probe.values[p.name]
        for p in exercise.parameters
    )
    values = {p.name: probe.values[p.name] for p in exercise.parameters}
    case = Case(
        values={
            k: tuple(v.shape) if isinstance(v, torch.Tensor) else v
            for k, v in zip(values, args, strict=True)
        }
    )
    run = _run(exercise, case, dtype, args, generator)
    if not _finite(run):
        raise ValueError(f"stability[{index}]: the reference itself is not finite there")
    return _with_slack(exercise, run, generator)


def _run(
    exercise: Exercise,
    case: Case,
    dtype: torch.dtype,
    args: tuple[object, ...],
    generator: torch.Generator,
    upstream: tuple[torch.Tensor, ...] | None = None,
) -> Run:
    live = [
        a.detach().clone().requires_grad_(p.requires_grad)
        if isinstance(p, TensorParam) and isinstance(a, torch.Tensor)
        else a
        for p, a in zip(exercise.parameters, args, strict=True)
    ]
    outputs = evaluate_reference(exercise, live)
    names = [p.name for p in exercise.parameters if isinstance(p, TensorParam) and p.requires_grad]
    wanting = [a for a, p in zip(live, exercise.parameters, strict=True) if p.name in names]

    def gradients(upstream: tuple[torch.Tensor, ...]) -> dict[str, torch.Tensor]:
        stated = _stated_gradients(exercise, live, upstream)
        grads = torch.autograd.grad(
            weighted_sum(outputs, upstream),  # float outputs only
            [w for w in wanting if isinstance(w, torch.Tensor)],
            allow_unused=True,
            retain_graph=True,
        )
        computed = {
            name: (g if g is not None else torch.zeros_like(w)).detach()
            for name, g, w in zip(names, grads, wanting, strict=True)
            if isinstance(w, torch.Tensor)
        }
        return {**computed, **stated}

    def random_upstream() -> tuple[torch.Tensor, ...]:
        return tuple(
            torch.randn(o.shape, dtype=torch.float64, generator=generator).to(o.dtype)
            if o.is_floating_point()
            else torch.zeros_like(o)  # an integer output takes no gradient
            for o in outputs
        )

    if upstream is None:
        upstream = random_upstream()
    else:
        upstream = tuple(u.to(o.dtype) for u, o in zip(upstream, outputs, strict=True))
    # A second upstream gradient (a backward that ignores grad_output answers the
    # same for both): for small runs only, where the diagnosis looks; a large run
    # keeps one set of tensors.
    large = elements(args) > SMALL
    upstream_other = upstream if large else random_upstream()
    expected_grads = gradients(upstream)
    tolerance = (
        exercise.tolerances.float32 if dtype == torch.float32 else exercise.tolerances.float64
    )
    known_wrong: dict[str, dict[str, list[tuple[str, torch.Tensor]]]] = {}
    for mistake, declared in exercise.mistakes.items():
        for name, wrong in _stated_gradients(exercise, live, upstream, declared.gradient).items():
            known_wrong.setdefault(name, {}).setdefault(mistake, []).append((declared.words, wrong))
    if len(differentiable(outputs, upstream)[0]) > 1:  # a backward that ignores an upstream
        for ignored in range(len(outputs)):
            if not outputs[ignored].is_floating_point():
                continue
            partial = tuple(
                torch.zeros_like(u) if index == ignored else u for index, u in enumerate(upstream)
            )
            words = (
                f"{MISTAKES['ignores_an_upstream']}: the gradient is what it would be if "
                f"output {ignored + 1} were not used (grad_out{ignored + 1} is ignored)"
            )
            for name, wrong in gradients(partial).items():
                alternatives = known_wrong.setdefault(name, {}).setdefault(
                    "ignores_an_upstream", []
                )
                alternatives.append((words, wrong))
    return Run(
        case=case,
        dtype=dtype,
        params=exercise.parameters,
        args=tuple(a.detach() if isinstance(a, torch.Tensor) else a for a in args),
        expected_outputs=tuple(o.detach() for o in outputs),
        upstream=upstream,
        expected_grads=expected_grads,
        tolerance=tolerance,
        upstream_other=upstream_other,
        expected_grads_other=expected_grads if large else gradients(upstream_other),
        known_wrong=known_wrong,
    )


def reference_saved_bytes(exercise: Exercise, plan: Plan, solution: str | None) -> dict[str, int]:
    """Bytes the reference solution's forward saves for backward, per run (for advice only)."""
    if not solution or not Path(solution).is_file():
        return {}
    try:
        namespace: dict[str, Any] = {"__name__": "reference_solution"}
        exec(compile(Path(solution).read_text(encoding="utf-8"), solution, "exec"), namespace)
        function_class = namespace[exercise.class_name]
        saved: dict[str, int] = {}
        for run in plan.runs:
            result = function_class.apply(*run.fresh_args())
            outputs = result if isinstance(result, tuple | list) else (result,)
            ctx = next(o.grad_fn for o in outputs if o.grad_fn is not None)
            saved[run.label] = sum(t.numel() * t.element_size() for t in ctx.saved_tensors)
        return saved
    except Exception:  # advice is optional; a check never fails for want of it
        return {}


def reference_runs(exercise: Exercise, seed: int, max_elements: int = SMALL) -> tuple[Run, ...]:
    """One float64 run per case of at most ``max_elements`` elements: random inputs, two
    random upstream gradients, the reference's outputs and gradients for both, and the
    gradients of the spec's declared mistakes. What `trainer derive` holds a formula to,
    without the rest of :func:`build_plan` (domain, structured and tie runs: seconds)."""
    generator = torch.Generator().manual_seed(seed)
    runs = []
    for case in exercise.cases:
        if _case_numel(case) > max_elements:
            continue
        base = _case_values(exercise, case, generator)
        runs.append(_run(exercise, case, torch.float64, _cast(base, torch.float64), generator))
    return tuple(runs)
