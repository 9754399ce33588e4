"""What a formula means, in torch: the whiteboard's evaluator.

A tree of :mod:`trainer.formula` is evaluated node by node with torch in float64.
What a name or a function means is looked up in this module's tables (the names
of the scope a caller builds, :data:`_ELEMENTWISE`, :data:`_ARITHMETIC`,
:data:`_COMPARE`, :data:`_REDUCE`); nothing of the text ever reaches Python's own
evaluation. Reductions keep the dimensions they reduce (size 1), so ``y * (g -
sum(g * y, dim))`` broadcasts as written. A part of a formula that cannot be
computed (shapes that do not fit, a dimension that does not exist) is an
:class:`~trainer.formula.EvaluationError` with its span in the text.

A formula's value becomes a gradient of the input's shape the way math notation
means it (:func:`as_gradient`): a number, or a value that broadcasts to the input,
is spread over it; dimensions of size 1 (what a kept sum leaves) are dropped. A
value that is larger than the input (not summed over a batch) or transposed is
not reshaped: its shape is part of the verdict.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import torch
import torch.nn.functional as F

from trainer.formula import (
    ALL_BUT,
    CONSTANTS,
    Binary,
    Call,
    Compare,
    Dims,
    EvaluationError,
    Name,
    Node,
    Number,
    Transpose,
    Unary,
)

Scalar = float | int | bool
Scope = Mapping[str, "torch.Tensor | Scalar"]
DTYPE = torch.float64
MAX_CLASSES = 100_000  # the length of a one-hot's new dimension
MAX_ELEMENTS = 10_000_000  # of a one-hot: a formula never allocates more than this


def _tensor(value: float) -> torch.Tensor:
    return torch.tensor(value, dtype=DTYPE)


def shape_text(value: torch.Tensor) -> str:
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
        shapes = " and ".join(shape_text(v) for v in values)
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
            f"@ cannot multiply shapes {shape_text(left)} and {shape_text(right)}: the last dimension "
            f"of the left must equal the {inner} of the right",
        ) from None


def _call(node: Call, scope: Scope) -> torch.Tensor:
    name = node.function
    if name in _ELEMENTWISE:
        return _ELEMENTWISE[name](evaluate(node.args[0], scope))
    if name == "where":
        condition = evaluate(node.args[0], scope)
        if condition.dim() == 0:
            # A number as the condition is an if: only the value chosen is computed, so
            # the two may have shapes that do not broadcast (keepdim or not).
            return evaluate(node.args[1] if bool(condition != 0) else node.args[2], scope)
        values = [condition, *(evaluate(a, scope) for a in node.args[1:])]
        _broadcast(node, *values)
        return torch.where(values[0] != 0, values[1], values[2])
    if name in ("max", "min"):
        values = [evaluate(a, scope) for a in node.args]
        _broadcast(node, *values)
        return torch.maximum(*values) if name == "max" else torch.minimum(*values)
    if name == "sum_to":
        return _sum_to(node, scope)
    if name == "numel":
        return _tensor(float(evaluate(node.args[0], scope).numel()))
    if name == "size":
        value = evaluate(node.args[0], scope)
        if value.dim() == 0:
            raise _fail(node, "a number has no dimensions to measure")
        (dim,) = _dims(node.args[1], scope, value)
        return _tensor(float(value.shape[dim]))
    if name == "onehot":
        return _onehot(node, scope)
    if name == "tril":
        value = evaluate(node.args[0], scope)
        if value.dim() < 2:
            raise _fail(node, f"tril needs two dimensions or more, not {shape_text(value)}")
        return torch.tril(value)
    if name == "reshape":
        value, like = (evaluate(a, scope) for a in node.args)
        if value.numel() != like.numel():
            raise _fail(
                node,
                f"a {shape_text(value)} value cannot take the shape {shape_text(like)}: "
                "they differ in their number of elements",
            )
        return value.reshape(like.shape)
    if name == "unsqueeze":
        value = evaluate(node.args[0], scope)
        dim = _dim(node.args[1], scope)
        if not -value.dim() - 1 <= dim <= value.dim():
            raise _fail(node.args[1], f"a new dimension {dim} cannot go in {shape_text(value)}")
        return value.unsqueeze(dim)
    if name in _REDUCE:
        value = evaluate(node.args[0], scope)
        dims = _dims(node.args[1], scope, value) if len(node.args) > 1 else None
        if dims is not None and len(dims) != 1 and name in ("softmax", "log_softmax"):
            raise _fail(node.args[1], f"{name} runs along one dimension")
        if dims == ():
            return value * 0 if name == "var" else value  # over no dimension at all
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
            f"a {shape_text(value)} value cannot be summed down to the shape of "
            f"{target.name}, {shape_text(like)}",
        ) from None


def _onehot(node: Call, scope: Scope) -> torch.Tensor:
    """``onehot(t, C)``: t's shape and a new last dimension of length C, 1 where the
    position equals t, 0 elsewhere (a t outside 0…C−1, such as an ignore index of -100,
    gives a row of zeros)."""
    indices, count = (evaluate(a, scope) for a in node.args)
    number = float(count.reshape(-1)[0]) if count.numel() == 1 else math.nan
    if not (math.isfinite(number) and number.is_integer() and number >= 1):
        raise _fail(node.args[1], "the number of classes C is one whole number, 1 or more")
    classes = int(number)
    if classes > MAX_CLASSES or indices.numel() * classes > MAX_ELEMENTS:
        raise _fail(node, f"a one-hot of more than {MAX_ELEMENTS} elements is not computed")
    positions = torch.arange(classes, dtype=DTYPE)
    return (indices.unsqueeze(-1) == positions).to(DTYPE)


def _dims(node: Node, scope: Scope, value: torch.Tensor) -> tuple[int, ...]:
    """The dimensions a reduction runs over, each checked against ``value``; those of
    ``all_but(…)`` are every dimension of ``value`` but the ones it lists."""
    if isinstance(node, Call) and node.function == ALL_BUT:
        rank = max(value.dim(), 1)
        left_out = {d % rank for d in _dims(node.args[0], scope, value)}
        return tuple(d for d in range(value.dim()) if d not in left_out)
    items = node.items if isinstance(node, Dims) else (node,)
    dims: list[int] = []
    rank = max(value.dim(), 1)
    for item in items:
        dim = _dim(item, scope)
        if not -rank <= dim < rank:
            raise _fail(
                item,
                f"dimension {dim} does not exist: the value has {value.dim()} "
                f"dimension{'s' * (value.dim() != 1)} {shape_text(value)}",
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
    dimensions of size 1 dropped, a value that broadcasts to the input spread over it,
    one that has the input's shape but for dimensions of size 1 (a kept reduction over
    all but a middle dimension) taken in the input's shape. Any other shape is left as
    it is (the verdict says why it is wrong)."""
    while value.dim() > like.dim() and value.shape[0] == 1:
        value = value[0]
    if value.dim() <= like.dim() and broadcast_shape(value.shape, like.shape) == like.shape:
        value = value.expand(like.shape)
    elif _without_ones(value.shape) == _without_ones(like.shape):
        value = value.reshape(like.shape)  # the kept dimensions of a reduction elsewhere
    return value


def _without_ones(shape: Sequence[int]) -> list[int]:
    return [size for size in shape if size != 1]
