"""Numeric and symbolic differentiation, as the derivation watch can see them.

Runs in the learner's process. :mod:`derivation` asks these questions; this
module only answers them, so that what counts as "numeric" or "symbolic" is
written down in one place:

Finite differences
    A difference quotient needs a *perturbed copy* of a tensor: ``x + h`` or
    ``x - h`` with a scalar step ``0 < |h| <= MAX_STEP`` (a Python number or a
    0-dim tensor; :func:`step_of`). A copy alone is not a finite difference:
    ``torch.log(x + 1e-12)`` and ``var + eps`` are ordinary code. It becomes one,
    within one call of a method, when

    * the same tensor is perturbed by two different steps (``x + h`` and
      ``x - h``: a central difference), or
    * a difference made from a perturbed copy (``f(x + h) - f(x)``, and whatever is
      computed from it) is divided by a step taken there, or twice it (``/ h``,
      ``/ (2 * h)``), or multiplied by its inverse, the step a number written in the
      code (:func:`divides_by_step`: forward and central differences alike), or
    * the learner's own ``forward`` is called with a perturbed copy.

    Recomputing the forward's function on the *saved* input (``torch.sigmoid(x)``
    in backward) perturbs nothing and is never flagged.

Complex step
    A complex tensor made inside a method other than ``forward`` of a Function
    whose tensors are all real (:func:`is_complex_result`): ``imag(f(x + i h)) / h``
    needs one. ``forward`` may use complex arithmetic (an FFT).

Symbolic differentiation
    ``sympy`` named by the learner's source (:func:`sympy_in_source`: an
    ``import``, a name or attribute ``sympy``, the string ``"sympy"``) or held by
    the module once imported (:func:`sympy_in_module`: a module, function, class
    or expression of sympy among its globals or the class's attributes). torch
    imports sympy itself; only the learner's own use counts.

Not seen: a step kept as a tensor of many elements (``x + h * e_i``), a
multiplicative perturbation ``x * (1 + h)``, arithmetic on Python numbers or
NumPy arrays (``math``, ``cmath``), sympy reached through an obfuscated import.
"""

from __future__ import annotations

import ast
import math
import sys
import types
from collections.abc import Callable
from typing import Any, TypeVar

import torch

T = TypeVar("T")

# The largest step taken for a finite difference; steps of 1e-2 to 1e-10 are usual.
MAX_STEP = 1e-2

_ADDS = frozenset({"add.Tensor", "add.Scalar", "add_.Tensor", "add_.Scalar"})
_SUBS = frozenset({"sub.Tensor", "sub.Scalar", "sub_.Tensor", "sub_.Scalar", "rsub.Scalar"})
_DIVS = frozenset({"div.Tensor", "div.Scalar", "div_.Tensor", "div_.Scalar"})
_MULS = frozenset({"mul.Tensor", "mul.Scalar", "mul_.Tensor", "mul_.Scalar"})
_CONSTANTS = frozenset({"lift_fresh.default", "scalar_tensor.default"})


def _scalar(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, torch.Tensor) and value.dim() == 0 and not value.is_complex():
        with torch._C._DisableTorchDispatch():
            return float(value.item()) if value.dtype.is_floating_point else None
    return None


def per_op(compute: Callable[[Any], T]) -> Callable[[Any], T]:
    """``compute`` of an op, worked out once per op and looked up by id: it is asked of
    every op the learner's code runs, where hashing an OpOverload runs Python code. The
    op is kept with its answer, so its id is never reused."""
    known: dict[int, tuple[Any, T]] = {}

    def cached(func: Any) -> T:
        entry = known.get(id(func))
        if entry is not None and entry[0] is func:
            return entry[1]
        value = compute(func)
        known[id(func)] = (func, value)
        return value

    return cached


def _kind_of(func: Any) -> str | None:
    """ "add", "sub", "div" or "mul" for the aten ops that are one (any overload)."""
    try:
        name = f"{func._schema.name.split('::')[-1]}.{func._overloadname}"
    except AttributeError:  # a higher-order op
        return None
    for kind, names in (
        ("add", _ADDS),
        ("sub", _SUBS),
        ("div", _DIVS),
        ("mul", _MULS),
        ("constant", _CONSTANTS),
    ):
        if name in names:
            return "rsub" if name == "rsub.Scalar" else kind
    return None


_arithmetic = per_op(_kind_of)


def _writes_first(func: Any) -> bool:
    try:
        alias = func._schema.arguments[0].alias_info
    except (AttributeError, IndexError):  # a higher-order op, or no arguments
        return False
    return alias is not None and bool(alias.is_write)


_writes = per_op(_writes_first)


def writes_first(func: Any) -> bool:
    """Whether ``func`` writes into its first argument (``add_``, ``copy_``)."""
    return _writes(func)


ARITHMETIC = frozenset({"add", "sub", "mul", "div"})


def arithmetic_kind(func: Any) -> str | None:
    """ "add", "sub", "mul", "div", "constant" (a tensor of a number) or None."""
    return _arithmetic(func)


def step_of(
    func: Any, args: tuple[Any, ...], constants: dict[int, Any], kind: str | None = None
) -> tuple[torch.Tensor, float] | None:
    """``(tensor, h)`` when ``func(*args)`` is ``tensor + h`` or ``tensor - h`` (signed)
    with a small step: a perturbed copy of ``tensor``. The step is a Python number or a
    0-dim tensor among ``constants`` (made from a number in the same call, by id: a
    0-dim tensor computed from the data, a mean, is no step). ``kind``: the op's, when
    the caller knows it."""
    kind = kind or _arithmetic(func)
    if kind not in ("add", "sub") or len(args) < 2:
        return None
    first, second = args[0], args[1]
    alpha = _scalar(args[2]) if len(args) > 2 else 1.0
    if alpha is None:
        return None
    tensor, step = first, _step(second, constants)
    if step is None or not isinstance(first, torch.Tensor):
        if kind == "sub":
            return None  # h - x is not a perturbation of x
        tensor, step = second, _step(first, constants)  # h + x
    if step is None or not isinstance(tensor, torch.Tensor) or tensor.is_complex():
        return None
    if not tensor.dtype.is_floating_point:
        return None
    step *= alpha
    if kind == "sub":
        step = -step
    if 0 < abs(step) <= MAX_STEP:
        return tensor, step
    return None


def _step(value: object, constants: dict[int, Any]) -> float | None:
    if isinstance(value, torch.Tensor):
        ref = constants.get(id(value))
        if ref is None or ref() is not value:
            return None
    return _scalar(value)


def divides_by_step(
    func: Any,
    args: tuple[Any, ...],
    steps: set[float],
    constants: dict[int, Any],
    differences: dict[int, Any],
    kind: str | None = None,
) -> bool:
    """Whether ``func(*args)`` is the quotient of a finite difference: a difference made
    from a perturbed copy (among ``differences``) divided by one of ``steps`` or twice
    it, or multiplied by the inverse. The divisor is a number written in the code (a
    Python number, or a 0-dim tensor among ``constants``): a 0-dim tensor computed from
    the data that happens to equal a step (a weight of 1000 with eps = 1e-3, a norm of
    0 plus eps) is no step, and a quotient of anything else is no difference."""
    if not steps or len(args) < 2:
        return False
    kind = kind or _arithmetic(func)
    if kind == "div":
        pairs = [(args[0], args[1])]
        inverse = False
    elif kind == "mul":
        pairs = [(args[0], args[1]), (args[1], args[0])]
        inverse = True
    else:
        return False
    for dividend, divisor in pairs:
        if not held(dividend, differences):
            continue
        value = _step(divisor, constants)
        if value is None or value == 0:
            continue
        size = abs(1 / value) if inverse else abs(value)
        if any(
            math.isclose(size, step, rel_tol=1e-6) or math.isclose(size, 2 * step, rel_tol=1e-6)
            for step in steps
        ):
            return True
    return False


def held(value: object, table: dict[int, Any]) -> bool:
    """Whether ``value`` is the very tensor ``table`` keeps a weak reference to, by id."""
    if not isinstance(value, torch.Tensor):
        return False
    ref = table.get(id(value))
    return ref is not None and ref() is value


def is_number(value: object, constants: dict[int, Any]) -> bool:
    """A Python number, or a 0-dim tensor among ``constants``."""
    if isinstance(value, torch.Tensor):
        return held(value, constants)
    return isinstance(value, int | float) and not isinstance(value, bool)


def off_the_real_line(result: object) -> bool:
    """Whether a complex tensor sits a small step off the real line, whatever made it
    (``x + 1e-30j``, ``torch.complex(x, full_like(x, h))``, ``view_as_complex`` of a
    stacked step, ``x * exp(1j * h)``): its imaginary part is one small number
    everywhere, or one small fraction of its real part. The complex step's first move,
    in any method (``forward`` may use complex arithmetic, an FFT, but not to step off
    the real line)."""
    if not isinstance(result, torch.Tensor) or not result.is_complex() or not result.numel():
        return False
    with torch._C._DisableTorchDispatch():
        imag, real = result.imag.reshape(-1), result.real.reshape(-1)
        first = float(imag[0])
        if 0 < abs(first) <= MAX_STEP and bool((imag == imag[0]).all()):
            return True
        nonzero = real != 0
        if not bool(nonzero.any()) or bool((imag[~nonzero] != 0).any()):
            return False
        ratio = imag[nonzero] / real[nonzero]
        step = float(ratio[0])
        return 0 < abs(step) <= MAX_STEP and bool(((ratio - step).abs() <= 1e-6 * abs(step)).all())


def is_complex_result(result: object) -> bool:
    if isinstance(result, torch.Tensor):
        return result.is_complex()
    if isinstance(result, tuple | list):
        return any(isinstance(r, torch.Tensor) and r.is_complex() for r in result)
    return False


def any_complex(values: tuple[Any, ...]) -> bool:
    return any(isinstance(v, torch.Tensor) and v.is_complex() for v in values)


# -- sympy ---------------------------------------------------------------------------


def _names_sympy(text: str) -> bool:
    return text == "sympy" or text.startswith("sympy.")


def sympy_in_source(source: str) -> int | None:
    """The first line of the learner's source that names sympy, or None."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        named = False
        if isinstance(node, ast.Import):
            named = any(_names_sympy(alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            named = _names_sympy(node.module or "")
        elif isinstance(node, ast.Name):
            named = node.id == "sympy"
        elif isinstance(node, ast.Attribute):
            named = node.attr == "sympy"
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            named = _names_sympy(node.value)
        if named:
            return int(getattr(node, "lineno", 0))
    return None


def _from_sympy(value: object) -> bool:
    if isinstance(value, types.ModuleType):
        return _names_sympy(value.__name__)
    module = getattr(type(value), "__module__", None) or ""
    if _names_sympy(module):
        return True
    if isinstance(value, type | types.FunctionType | types.BuiltinFunctionType):
        return _names_sympy(getattr(value, "__module__", None) or "")
    return False


def sympy_in_module(module: types.ModuleType, function_class: type | None) -> str | None:
    """The name of a global of the learner's module (or an attribute of its class) that
    comes from sympy, or None. Cheap when sympy was never imported."""
    if "sympy" not in sys.modules:
        return None
    places: list[dict[str, Any]] = [vars(module)]
    if function_class is not None:
        places.append(dict(vars(function_class)))
    for place in places:
        for name, value in list(place.items()):
            try:
                if _from_sympy(value):
                    return name
            except Exception:  # a learner's object may raise on any attribute
                continue
    return None
