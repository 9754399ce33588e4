"""The whiteboard: a gradient written as a formula, evaluated with torch and judged.

A formula (:mod:`trainer.formula`) is evaluated node by node with torch in
float64 on the checker's own random inputs (:func:`reference_runs`: one run per
small case of the spec, with two random upstream gradients each), and compared
with the reference's gradient. A wrong one is named like a wrong backward: the
checker's diagnosis (forgets ``g``, sign, constant factor, transpose, missing sum,
the spec's own mistakes) in the words of a formula.

What a name or a function means is looked up in this module's tables (the names
a run provides, :data:`_ELEMENTWISE`, :data:`_REDUCE`); nothing of the text
ever reaches Python's own evaluation. Reductions keep the dimensions they
reduce (size 1), so ``y * (g - sum(g * y, dim))`` broadcasts as written.

A formula's value becomes a gradient of the input's shape the way math notation
means it: a number, or a value that broadcasts to the input, is spread over it;
leading dimensions of size 1 (what a kept sum leaves) are dropped. A value that
is larger than the input (not summed over a batch) or transposed is not
reshaped: its shape is part of the verdict.

``python -m trainer.whiteboard SPEC...`` checks the ``derive`` section of specs
for `trainer validate`, which imports no torch itself.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from trainer.checking.trusted.diagnosis import classify, compact_view
from trainer.checking.trusted.plan import Run, reference_runs
from trainer.formula import (
    CONSTANTS,
    Binary,
    Call,
    Compare,
    Dims,
    EvaluationError,
    FormulaError,
    Name,
    Node,
    Number,
    Transpose,
    Unary,
    output_names,
    understand,
)
from trainer.spec import Derivation, Exercise

Scalar = float | int | bool
Scope = Mapping[str, "torch.Tensor | Scalar"]
DTYPE = torch.float64
RTOL = 1e-6  # equivalent forms differ by rounding only; a mistake by far more
ATOL = 1e-9


def _tensor(value: float) -> torch.Tensor:
    return torch.tensor(value, dtype=DTYPE)


def _shape(value: torch.Tensor) -> str:
    dims = ", ".join(map(str, value.shape))
    return f"({dims}{',' if value.dim() == 1 else ''})"


def _fail(node: Node, message: str) -> EvaluationError:
    return EvaluationError(message, node.start, node.end)


def broadcast_shape(*shapes: Sequence[int]) -> tuple[int, ...] | None:
    """The shape ``shapes`` broadcast to, or None when they do not (torch's own
    ``broadcast_shapes`` imports torch._refs on first use: seconds)."""
    rank = max((len(s) for s in shapes), default=0)
    result = []
    for position in range(-rank, 0):
        sizes = {s[position] for s in shapes if len(s) >= -position} - {1}
        if len(sizes) > 1:
            return None
        result.append(sizes.pop() if sizes else 1)
    return tuple(result)


def _broadcast(node: Node, *values: torch.Tensor) -> None:
    if broadcast_shape(*(v.shape for v in values)) is None:
        shapes = " and ".join(_shape(v) for v in values)
        raise _fail(node, f"shapes {shapes} do not broadcast")


def _phi(t: torch.Tensor) -> torch.Tensor:
    return torch.exp(-0.5 * t * t) / math.sqrt(2 * math.pi)


def _cdf(t: torch.Tensor) -> torch.Tensor:
    return 0.5 * (1 + torch.erf(t / math.sqrt(2)))


_ELEMENTWISE: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "exp": torch.exp,
    "log": torch.log,
    "sqrt": torch.sqrt,
    "abs": torch.abs,
    "sign": torch.sign,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "softplus": F.softplus,
    "relu": torch.relu,
    "erf": torch.erf,
    "Phi": _cdf,
    "phi": _phi,
    "sin": torch.sin,
    "cos": torch.cos,
    "log1p": torch.log1p,
    "expm1": torch.expm1,
}
_ARITHMETIC: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "+": torch.add,
    "-": torch.sub,
    "*": torch.mul,
    "/": torch.div,
    "^": torch.pow,
}
_COMPARE: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "<": torch.lt,
    "<=": torch.le,
    ">": torch.gt,
    ">=": torch.ge,
    "==": torch.eq,
    "!=": torch.ne,
}


def _all(value: torch.Tensor, dims: tuple[int, ...] | None) -> tuple[int, ...]:
    return tuple(range(value.dim())) if dims is None else dims


# Reductions: every one keeps the dimensions it reduces.
_REDUCE: dict[str, Callable[[torch.Tensor, tuple[int, ...] | None], torch.Tensor]] = {
    "sum": lambda v, d: v.sum(dim=_all(v, d), keepdim=True) if v.dim() else v,
    "mean": lambda v, d: v.mean(dim=_all(v, d), keepdim=True) if v.dim() else v,
    "var": lambda v, d: (
        torch.var(v, dim=_all(v, d), correction=0, keepdim=True) if v.dim() else v * 0
    ),
    "amax": lambda v, d: v.amax(dim=_all(v, d), keepdim=True) if v.dim() else v,
    "logsumexp": lambda v, d: torch.logsumexp(v, dim=_all(v, d), keepdim=True),
    "softmax": lambda v, d: torch.softmax(v, dim=_all(v, d)[0]),
    "log_softmax": lambda v, d: torch.log_softmax(v, dim=_all(v, d)[0]),
}


def evaluate(node: Node, scope: Scope) -> torch.Tensor:
    """The value of ``node`` with the names of ``scope``: a float64 tensor, or an
    EvaluationError naming the part of the formula that cannot be computed."""
    if isinstance(node, Number):
        return _tensor(node.value)
    if isinstance(node, Name):
        return _name(node, scope)
    if isinstance(node, Unary):
        return -evaluate(node.operand, scope)
    if isinstance(node, Binary):
        return _binary(node, scope)
    if isinstance(node, Compare):
        left, right = evaluate(node.left, scope), evaluate(node.right, scope)
        _broadcast(node, left, right)
        return _COMPARE[node.op](left, right).to(DTYPE)
    if isinstance(node, Transpose):
        value = evaluate(node.operand, scope)
        return value.mT if value.dim() >= 2 else value
    if isinstance(node, Call):
        return _call(node, scope)
    raise _fail(node, "a list of dimensions is not a value")


def _name(node: Name, scope: Scope) -> torch.Tensor:
    if node.name in CONSTANTS:
        return _tensor(CONSTANTS[node.name])
    if node.name not in scope:
        raise _fail(node, f"`{node.name}` has no value here")
    value = scope[node.name]
    return value if isinstance(value, torch.Tensor) else _tensor(float(value))


def _binary(node: Binary, scope: Scope) -> torch.Tensor:
    left, right = evaluate(node.left, scope), evaluate(node.right, scope)
    if node.op != "@":
        _broadcast(node, left, right)
        return _ARITHMETIC[node.op](left, right)
    if left.dim() == 0 or right.dim() == 0:
        raise _fail(node, "@ multiplies matrices or vectors; a number multiplies with *")
    try:
        return torch.matmul(left, right)
    except RuntimeError:
        inner = "first" if right.dim() == 1 else "next-to-last"
        raise _fail(
            node,
            f"@ cannot multiply shapes {_shape(left)} and {_shape(right)}: the last dimension "
            f"of the left must equal the {inner} of the right",
        ) from None


def _call(node: Call, scope: Scope) -> torch.Tensor:
    name = node.function
    if name in _ELEMENTWISE:
        return _ELEMENTWISE[name](evaluate(node.args[0], scope))
    if name in ("max", "min", "where"):
        values = [evaluate(a, scope) for a in node.args]
        _broadcast(node, *values)
        if name == "where":
            return torch.where(values[0] != 0, values[1], values[2])
        return torch.maximum(*values) if name == "max" else torch.minimum(*values)
    if name == "sum_to":
        return _sum_to(node, scope)
    if name == "numel":
        return _tensor(float(evaluate(node.args[0], scope).numel()))
    if name == "unsqueeze":
        value = evaluate(node.args[0], scope)
        dim = _dim(node.args[1], scope)
        if not -value.dim() - 1 <= dim <= value.dim():
            raise _fail(node.args[1], f"a new dimension {dim} cannot go in {_shape(value)}")
        return value.unsqueeze(dim)
    if name in _REDUCE:
        value = evaluate(node.args[0], scope)
        dims = _dims(node.args[1], scope, value) if len(node.args) > 1 else None
        if dims is not None and len(dims) > 1 and name in ("softmax", "log_softmax"):
            raise _fail(node.args[1], f"{name} runs along one dimension")
        return _REDUCE[name](value, dims)
    raise _fail(node, f"`{name}` cannot be computed here")  # understand() lets none through


def _sum_to(node: Call, scope: Scope) -> torch.Tensor:
    value = evaluate(node.args[0], scope)
    target = node.args[1]
    assert isinstance(target, Name)
    like = _name(target, scope)
    if value.dim() <= like.dim() and broadcast_shape(value.shape, like.shape) == like.shape:
        return value.expand(like.shape)
    try:
        return value.sum_to_size(like.shape)
    except RuntimeError:
        raise _fail(
            node,
            f"a {_shape(value)} value cannot be summed down to the shape of "
            f"{target.name}, {_shape(like)}",
        ) from None


def _dims(node: Node, scope: Scope, value: torch.Tensor) -> tuple[int, ...]:
    """The dimensions a reduction runs over, each checked against ``value``."""
    items = node.items if isinstance(node, Dims) else (node,)
    dims: list[int] = []
    rank = max(value.dim(), 1)
    for item in items:
        dim = _dim(item, scope)
        if not -rank <= dim < rank:
            raise _fail(
                item,
                f"dimension {dim} does not exist: the value has {value.dim()} "
                f"dimension{'s' * (value.dim() != 1)} {_shape(value)}",
            )
        if dim % rank in [d % rank for d in dims]:
            raise _fail(item, f"dimension {dim} is listed twice")
        dims.append(dim)
    return tuple(dims)


def _dim(node: Node, scope: Scope) -> int:
    if isinstance(node, Unary):
        return -_dim(node.operand, scope)
    if isinstance(node, Number) and node.integer:
        return int(node.value)
    if isinstance(node, Name):
        value = scope.get(node.name)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise _fail(node, f"`{node.name}` is not a whole number, so it is not a dimension")
    raise _fail(node, "a dimension is a whole number")


def as_gradient(value: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """A formula's value as a gradient for ``like``, as math notation means it: leading
    dimensions of size 1 dropped, a value that broadcasts to the input spread over it.
    Any other shape is left as it is (the verdict says why it is wrong)."""
    while value.dim() > like.dim() and value.shape[0] == 1:
        value = value[0]
    if value.dim() <= like.dim() and broadcast_shape(value.shape, like.shape) == like.shape:
        value = value.expand(like.shape)
    return value


# A verdict.


@dataclass(frozen=True)
class Right:
    runs: int  # the cases it was right on


@dataclass(frozen=True)
class Wrong:
    mistake: str  # a mistake id (the checker's, or the spec's), or "unknown"
    words: str  # what the learner reads
    case: str  # the first case it is wrong on, e.g. "x: (4, 5)"
    wrong_runs: int
    runs: int
    view: tuple[str, ...] = ()  # a few elements, expected against got
    error: EvaluationError | None = None  # where it could not be computed


@dataclass(frozen=True)
class NotUnderstood:
    error: FormulaError


Verdict = Right | Wrong | NotUnderstood


def _words(mistake: str, default: str, name: str, factor: float) -> str:
    """A diagnosis in the words of a formula: what the formula does, not backward."""
    said = {
        "no_grad_output": "your formula forgets g: it gives the same whatever the upstream "
        "gradient is, and the chain rule multiplies by it",
        "sign_flipped": "your formula has the sign flipped: it is minus the gradient",
        "all_zeros": "your formula is zero everywhere",
        "transposed": "your formula gives the transpose of the gradient",
        "not_summed_over_batch": f"your formula is not summed over the dimensions {name} is "
        "broadcast along (or reused over): each use adds to its gradient, so sum them",
        "missing_mask": "your formula lets the gradient through where the function is flat: "
        "a factor such as (x > 0) is missing or wrong",
        "inverted_mask": "your formula's mask is inverted: the gradient flows exactly where "
        "it should be zero",
        "constant_factor": f"your formula is off by a constant factor: {factor:.4g} times the "
        "gradient",
        "unknown": "your formula does not give the gradient, and no classic mistake fits",
    }
    return said.get(mistake, default)


class Whiteboard:
    """One exercise's derivation: its names, and the runs a formula is held to."""

    def __init__(self, exercise: Exercise, seed: int = 0) -> None:
        if exercise.derive is None:
            raise ValueError(f"{exercise.id} has no derive section")
        self.exercise = exercise
        self.derivation: Derivation = exercise.derive
        self.runs: tuple[Run, ...] = reference_runs(exercise, seed)
        # Each run's names, with its first and with its second upstream gradient.
        self.scopes = [
            (self._scope(r, r.upstream), self._scope(r, r.upstream_other)) for r in self.runs
        ]

    def _scope(
        self, run: Run, upstream: Sequence[torch.Tensor]
    ) -> dict[str, torch.Tensor | Scalar]:
        scope: dict[str, torch.Tensor | Scalar] = {}
        for param, value in zip(run.params, run.args, strict=True):
            if param.name not in self.derivation.scope:
                continue
            if isinstance(value, torch.Tensor):
                scope[param.name] = value.to(DTYPE)
            elif isinstance(value, float | int | bool):
                scope[param.name] = value
        pairs = output_names(len(run.expected_outputs))
        for (y, g), output, gradient in zip(pairs, run.expected_outputs, upstream, strict=True):
            scope[y], scope[g] = output, gradient
        scope["grad_output"] = upstream[0]
        for name, text in self.derivation.names.items():
            scope[name] = evaluate(understand(text, list(scope)), scope)
        return scope

    def judge(self, input_name: str, text: str) -> Verdict:
        """Right, wrong (with the nearest classic mistake) or not understood."""
        try:
            node = understand(text, self.derivation.scope)
        except FormulaError as error:
            return NotUnderstood(error)
        return self.judge_node(input_name, node)

    def judge_node(self, input_name: str, node: Node) -> Right | Wrong:
        found: list[Wrong] = []
        for run, (scope, scope_other) in zip(self.runs, self.scopes, strict=True):
            verdict = self._judge_run(run, input_name, node, scope, scope_other)
            if verdict is not None:
                found.append(verdict)
        if not found:
            return Right(len(self.runs))
        first = _most_telling(found)
        return Wrong(
            first.mistake,
            first.words,
            first.case,
            len(found),
            len(self.runs),
            first.view,
            first.error,
        )

    def _judge_run(
        self, run: Run, input_name: str, node: Node, scope: Scope, scope_other: Scope
    ) -> Wrong | None:
        like = scope[input_name]
        assert isinstance(like, torch.Tensor)
        case = run.case.describe()
        expected = run.expected_grads[input_name].to(DTYPE)
        try:
            got = as_gradient(evaluate(node, scope), like)
        except EvaluationError as error:
            words = f"it cannot be computed for {case}: {error.message}"
            return Wrong("cannot_compute", words, case, 1, 1, error=error)
        atol = _atol(expected)
        if _close(got, expected):
            return None
        if (
            got.shape == expected.shape
            and bool(expected.isfinite().all())
            and not bool(got.isfinite().all())
        ):
            words = (
                "your formula is not finite (inf or nan) where the gradient is: a log or a "
                "square root of a negative number, a division by zero, or an overflow"
            )
            return Wrong("non_finite", words, case, 1, 1, _view(input_name, expected, got, like))
        view = _view(input_name, expected, got, like)
        if got.shape != expected.shape:
            view = (
                f"your formula gives {_shape(got)} for {input_name}, which is {_shape(expected)}",
            )
        for mistake, (words, wrong) in run.known_wrong.get(input_name, {}).items():
            # The spec's own mistakes, whatever shape the formula keeps (a kept sum).
            if wrong.numel() == got.numel() and _close(got.reshape(wrong.shape), wrong):
                return Wrong(mistake, words, case, 1, 1, view)
        try:
            got_other: torch.Tensor | None = as_gradient(evaluate(node, scope_other), like)
        except EvaluationError:
            got_other = None
        upstream = run.upstream[0] if run.upstream[0].shape == expected.shape else None
        mistake, default = classify(
            expected,
            got,
            expected_other=run.expected_grads_other[input_name],
            got_other=got_other,
            upstream=upstream,
            known=run.known_wrong.get(input_name, {}),
            rtol=RTOL,
            atol=atol,
        )
        factor = _factor(expected, got)
        if mistake == "constant_factor" and expected.numel() == 1:
            mistake = "unknown"  # one number is a multiple of any other
        if got.shape != expected.shape and mistake == "unknown":
            mistake, view = "wrong_shape", ()
            default = (
                f"your formula gives a {_shape(got)} value for {input_name}, which is "
                f"{_shape(expected)}"
            )
        words = _words(mistake, default, input_name, factor)
        return Wrong(mistake, words, case, 1, 1, view)


# Verdicts that compared no values: a shape that does not fit, a formula that cannot be
# computed. A named mistake on some cases tells more than they do.
_NO_VALUES = ("wrong_shape", "cannot_compute")


def _most_telling(found: Sequence[Wrong]) -> Wrong:
    """The wrong case to report: the mistake named on the most cases, when it is named
    on at least as many as "no mistake fits" (one element is a "constant factor" of
    anything; a consistent mistake shows on every case); else the verdict of the most
    cases (a shape that does not fit on most says more than the odd case that fits)."""
    counts: dict[str, int] = {}
    for wrong in found:
        counts[wrong.mistake] = counts.get(wrong.mistake, 0) + 1
    named = [w for w in found if w.mistake not in ("unknown", *_NO_VALUES)]
    if named:
        best = max(named, key=lambda w: counts[w.mistake])
        if counts[best.mistake] >= counts.get("unknown", 0):
            return best
    return max(found, key=lambda w: counts[w.mistake])


def _atol(expected: torch.Tensor) -> float:
    """The absolute tolerance: ATOL at the scale of the gradient's finite values."""
    finite = expected[expected.isfinite()]
    return ATOL * (1 + float(finite.abs().max()) if finite.numel() else 1)


def _close(got: torch.Tensor, expected: torch.Tensor) -> bool:
    atol = _atol(expected)
    return got.shape == expected.shape and bool(torch.allclose(got, expected, rtol=RTOL, atol=atol))


def _factor(expected: torch.Tensor, got: torch.Tensor) -> float:
    if got.shape != expected.shape:
        return 0.0
    denominator = float((expected * expected).sum())
    return float((got * expected).sum()) / denominator if denominator > 0 else 0.0


def _view(
    name: str, expected: torch.Tensor, got: torch.Tensor, like: torch.Tensor
) -> tuple[str, ...]:
    """The largest differences, at most three: where, the input there, expected, got."""
    lines = []
    for item in compact_view(expected, got)[:3]:
        index = tuple(item["index"])
        where = f"{name}[{', '.join(map(str, index))}]"
        at = f" (at {name} = {float(like[index]):.4g})" if like.shape == expected.shape else ""
        lines.append(f"{where}: expected {item['expected']:.6g}, got {item['got']:.6g}{at}")
    return tuple(lines)


def self_check(exercise: Exercise, seeds: Sequence[int] = (0, 1)) -> list[str]:
    """What is wrong with an exercise's ``derive`` section, each as ``derive.<field>:
    <problem>``: every answer must be right, every mistake's formula rejected with its
    mistake named, on the runs of each seed."""
    derivation = exercise.derive
    if derivation is None:
        return []
    problems: list[str] = []
    where = "derive"
    for seed in seeds:
        try:
            board = Whiteboard(exercise, seed)
        except EvaluationError as error:
            problems.append(f"{where}.names: cannot be computed: {error.message}")
            break
        for name, text in derivation.answers.items():
            verdict = board.judge(name, text)
            if not isinstance(verdict, Right):
                said = verdict.words if isinstance(verdict, Wrong) else verdict.error.message
                problems.append(
                    f"{where}.answers.{name}: the evaluator rejects it ({said}, for "
                    f"{verdict.case if isinstance(verdict, Wrong) else 'every case'}); it must "
                    "be the reference's gradient"
                )
        for mistake, formulas in derivation.mistakes.items():
            for name, text in formulas.items():
                verdict = board.judge(name, text)
                if isinstance(verdict, Right):
                    problems.append(
                        f"{where}.mistakes.{mistake}.{name}: the evaluator accepts it as right; "
                        "a mistake's formula must be wrong"
                    )
                elif isinstance(verdict, Wrong) and verdict.mistake != mistake:
                    problems.append(
                        f"{where}.mistakes.{mistake}.{name}: rejected, but named "
                        f"{verdict.mistake} instead of {mistake}"
                    )
    return list(dict.fromkeys(problems))


def main(paths: Sequence[str]) -> int:
    """``python -m trainer.whiteboard SPEC...``: each spec's derive problems as one JSON
    object, path -> problems (none for a spec that does not load: validation says why)."""
    from trainer.errors import SpecError
    from trainer.spec import load_exercise

    problems: dict[str, list[str]] = {}
    for path in paths:
        try:
            problems[path] = self_check(load_exercise(Path(path)))
        except SpecError:
            problems[path] = []  # validation reports the spec itself
    sys.stdout.write(json.dumps(problems) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
