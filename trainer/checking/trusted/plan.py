"""Inputs, upstream gradients and reference results, computed before any learner code runs.

Everything the learner's results are compared with is computed here, while
torch is known to be untouched; the stages then only call the learner's code
and compare.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from trainer.spec import Case, CaseValue, Exercise, ScalarParam, TensorParam, Tolerance

DTYPES = (torch.float32, torch.float64)
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
    # What `y.sum().backward()` gives: an upstream gradient of ones.
    expected_grads_ones: dict[str, torch.Tensor]

    @property
    def ones(self) -> tuple[torch.Tensor, ...]:
        return tuple(torch.ones_like(u) for u in self.upstream)

    @property
    def label(self) -> str:
        return f"{self.case.describe()} in {DTYPE_NAMES[self.dtype]}"

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

    @property
    def gradcheck_runs(self) -> tuple[Run, ...]:
        return tuple(r for r in self.runs if r.dtype == torch.float64)


def _kink_margin(param: TensorParam) -> float:
    # Far larger than gradcheck's eps and float32 rounding, small enough to keep
    # the distribution of inputs close to uniform.
    return max(1e-2 * (param.high - param.low), 1e-3)


def _kink_points(param: TensorParam, scalars: dict[str, CaseValue]) -> list[float]:
    env = {"math": math, "__builtins__": {}}
    return [float(eval(expr, env, dict(scalars))) for expr in param.kinks]


def make_tensor(
    param: TensorParam,
    shape: Sequence[int],
    scalars: dict[str, CaseValue],
    generator: torch.Generator,
) -> torch.Tensor:
    """Uniform values in [low, high], moved away from the declared kinks; ints in [low, high)."""
    if not param.is_float:
        return torch.randint(int(param.low), int(param.high), tuple(shape), generator=generator)
    values = torch.empty(tuple(shape), dtype=torch.float64)
    values.uniform_(param.low, param.high, generator=generator)
    margin = _kink_margin(param)
    for kink in _kink_points(param, scalars):
        distance = values - kink
        near = distance.abs() < margin
        direction = torch.where(distance >= 0, 1.0, -1.0).to(values.dtype)
        values = torch.where(near, kink + direction * 2 * margin, values)
    return values


def _stated_gradients(
    exercise: Exercise, args: Sequence[object], upstream: tuple[torch.Tensor, ...]
) -> dict[str, torch.Tensor]:
    """The spec's own gradient expressions, where autograd of the reference is not the target."""
    if not exercise.expected_gradient:
        return {}
    env = {"torch": torch, "F": F, "math": math, "__builtins__": builtins}
    local: dict[str, object] = {
        name: a.detach() if isinstance(a, torch.Tensor) else a
        for name, a in zip(exercise.param_names, args, strict=True)
    }
    local["grad_output"] = upstream[0]
    local["grad_outputs"] = upstream
    stated = {}
    for name, expression in exercise.expected_gradient.items():
        value = eval(expression, env, local)
        if not isinstance(value, torch.Tensor):
            raise ValueError(f"expected_gradient.{name} does not give a tensor")
        stated[name] = value.detach()
    return stated


def evaluate_reference(exercise: Exercise, args: Sequence[object]) -> tuple[torch.Tensor, ...]:
    env = {"torch": torch, "F": F, "math": math, "__builtins__": builtins}
    local = dict(zip(exercise.param_names, args, strict=True))
    result = eval(exercise.reference, env, local)
    outputs = tuple(result) if isinstance(result, tuple | list) else (result,)
    if len(outputs) != exercise.outputs:
        raise ValueError(
            f"{exercise.source}: reference gives {len(outputs)} outputs, spec says {exercise.outputs}"
        )
    return outputs


STATE_VALUE_SETS = 6


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
            base.append(make_tensor(param, value, scalars, generator))
        else:
            base.append(value)
    return base


def build_plan(exercise: Exercise, seed: int) -> Plan:
    generator = torch.Generator().manual_seed(seed)
    runs: list[Run] = []
    for case in exercise.cases:
        base = _case_values(exercise, case, generator)
        for dtype in DTYPES:
            args = tuple(
                a.to(dtype) if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                for a in base
            )
            runs.append(_run(exercise, case, dtype, args, generator))
    kink_runs = tuple(
        k for run in runs if run.dtype == torch.float64 for k in _kink_run(exercise, run, generator)
    )
    state_case = exercise.cases[0]
    state_runs = tuple(
        _run(
            exercise,
            state_case,
            torch.float64,
            tuple(_case_values(exercise, state_case, generator)),
            generator,
        )
        for _ in range(STATE_VALUE_SETS)
    )
    return Plan(
        runs=tuple(runs),
        kink_runs=kink_runs,
        state_runs=state_runs,
        stability_runs=tuple(
            _stability_run(exercise, index, generator) for index in range(len(exercise.stability))
        ),
    )


def _kink_run(exercise: Exercise, run: Run, generator: torch.Generator) -> list[KinkRun]:
    """The run's inputs with the first elements of each kinked tensor set on its kinks."""
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
        for flat_index, (expression, value) in enumerate(kinks[: tensor.numel()]):
            tensor.reshape(-1)[flat_index] = value
            low, high = _one_sided_slopes(exercise, args, position, flat_index)
            points.append(KinkPoint(param.name, flat_index, value, expression, low, high))
    if not points:
        return []
    return [
        KinkRun(
            run=_run(exercise, run.case, run.dtype, tuple(args), generator), points=tuple(points)
        )
    ]


def _one_sided_slopes(
    exercise: Exercise, args: list[object], position: int, flat_index: int
) -> tuple[float, float]:
    """The left and right derivatives of an element-wise function at one element, in order."""
    step = 1e-7
    values = []
    for shift in (-step, 0.0, step):
        shifted = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
        tensor = shifted[position]
        assert isinstance(tensor, torch.Tensor)
        tensor.reshape(-1)[flat_index] += shift
        with torch.no_grad():
            output = evaluate_reference(exercise, shifted)[0]
        values.append(float(output.reshape(-1)[flat_index]))
    left = (values[1] - values[0]) / step
    right = (values[2] - values[1]) / step
    return min(left, right), max(left, right)


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
    finite = all(bool(o.isfinite().all()) for o in run.expected_outputs) and all(
        bool(g.isfinite().all()) for g in run.expected_grads.values()
    )
    if not finite:
        raise ValueError(f"stability[{index}]: the reference itself is not finite there")
    return run


def _run(
    exercise: Exercise,
    case: Case,
    dtype: torch.dtype,
    args: tuple[object, ...],
    generator: torch.Generator,
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
            outputs,
            [w for w in wanting if isinstance(w, torch.Tensor)],
            upstream,
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
            for o in outputs
        )

    upstream, upstream_other = random_upstream(), random_upstream()
    tolerance = (
        exercise.tolerances.float32 if dtype == torch.float32 else exercise.tolerances.float64
    )
    return Run(
        case=case,
        dtype=dtype,
        params=exercise.parameters,
        args=tuple(a.detach() if isinstance(a, torch.Tensor) else a for a in args),
        expected_outputs=tuple(o.detach() for o in outputs),
        upstream=upstream,
        expected_grads=gradients(upstream),
        tolerance=tolerance,
        upstream_other=upstream_other,
        expected_grads_other=gradients(upstream_other),
        expected_grads_ones=gradients(tuple(torch.ones_like(o) for o in outputs)),
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
