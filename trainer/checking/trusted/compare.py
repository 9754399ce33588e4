"""Compare a learner's tensor with the expected one and say how it differs, in words.

Attributes come first (type, shape, dtype, device), then values: the largest
error, where it is, expected vs got and the tolerance allowed.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from trainer.checking.values import Opaque
from trainer.spec import Tolerance

# Kept before any learner code runs, so a patched torch cannot change a verdict.
_isnan = torch.isnan
_where = torch.where
_argmax = torch.argmax
_unravel = torch.unravel_index
_full_like = torch.full_like


def shape_text(shape: torch.Size | tuple[int, ...]) -> str:
    dims = ", ".join(str(d) for d in shape)
    return f"({dims},)" if len(shape) == 1 else f"({dims})"


def describe_value(value: object) -> str:
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {shape_text(value.shape)}"
    if value is None:
        return "None"
    if isinstance(value, tuple | list):
        return f"a {type(value).__name__} of {len(value)} values"
    if isinstance(value, Opaque):
        return f"a {value.type_name}"
    return f"a {type(value).__module__}.{type(value).__name__}".replace("builtins.", "")


def _number(value: float) -> str:
    return f"{value:.6g}"


def _distinct(value: float, other: float) -> str:
    """``value`` with as many significant digits as it takes to tell it from ``other``
    (6 as usual; up to 17, trailing zeros kept, so both read alike)."""
    for digits in range(6, 18):
        if f"{value:.{digits}g}" != f"{other:.{digits}g}":
            return f"{value:.6g}" if digits == 6 else f"{value:#.{digits}g}"
    return f"{value:.17g}"


@dataclass(frozen=True)
class Mismatch:
    summary: str  # what is wrong, e.g. "grad for `x` has shape (3,) but should have shape (4,)"
    detail: str = ""  # where and by how much, for value mismatches
    allowed: str = ""  # the tolerance, in words
    index: tuple[int, ...] | None = None  # the worst element
    wrong: torch.Tensor | None = None  # bool, where the values are out of tolerance
    # How wrong, against the values' own scale: the largest error / (1 + max |expected|).
    # Orders failures: the largest is shown first, not a float64 rounding in a first run.
    severity: float = 0.0


def compare_tensor(
    what: str,
    expected: torch.Tensor,
    got: object,
    tolerance: Tolerance,
    slack: torch.Tensor | None = None,
) -> Mismatch | None:
    """None when ``got`` matches ``expected``; otherwise how it differs, in words."""
    if not isinstance(got, torch.Tensor):
        return Mismatch(f"{what} is {describe_value(got)}, not a tensor")
    if got.shape != expected.shape:
        return Mismatch(
            f"{what} has shape {shape_text(got.shape)} but should have shape "
            f"{shape_text(expected.shape)}"
        )
    if got.dtype != expected.dtype:
        return Mismatch(f"{what} has dtype {got.dtype} but should have {expected.dtype}")
    if got.device != expected.device:
        return Mismatch(f"{what} is on {got.device} but should be on {expected.device}")
    if got.numel() == 0:
        return None
    got_values = got.detach().to(torch.float64)
    want = expected.detach().to(torch.float64)
    if _all_close(got_values, want, tolerance, slack):
        return None
    error = (got_values - want).abs()
    allowed = tolerance.atol + tolerance.rtol * want.abs()
    if slack is not None and (slack.dim() == 0 or slack.shape == want.shape):
        allowed = allowed + slack.to(torch.float64)
    nan_mismatch = _isnan(got_values) != _isnan(want)
    both_nan = _isnan(got_values) & _isnan(want)
    infinite_equal = (got_values == want) & got_values.isinf()
    excess = _where(both_nan | infinite_equal, _full_like(error, -1.0), error - allowed)
    excess = _where(nan_mismatch | _isnan(excess), _full_like(error, float("inf")), excess)
    bad = excess > 0
    if not bool(bad.any()):
        return None
    flat_index = int(_argmax(excess.reshape(-1)))
    index = tuple(int(i) for i in _unravel(torch.tensor(flat_index), got.shape))
    where = "[" + ", ".join(map(str, index)) + "]"
    count = int(bad.sum())
    exp_value = float(want[index])
    got_value = float(got_values[index])
    return Mismatch(
        f"{what} is wrong at {count} of {got.numel()} element{'s' * (got.numel() != 1)}",
        f"largest error {_number(abs(got_value - exp_value))} at {where}: "
        f"expected {_distinct(exp_value, got_value)}, got {_distinct(got_value, exp_value)} "
        f"(allowed {tolerance.atol:g} + {tolerance.rtol:g}·|expected|)",
        f"allowed {tolerance.atol:g} + {tolerance.rtol:g}·|expected|",
        index,
        bad,
        _severity(got_value, exp_value, want),
    )


def _severity(got: float, expected: float, want: torch.Tensor) -> float:
    """The largest error against the values' own scale; infinite for NaN or infinity."""
    finite = want[want.isfinite()] if want.numel() else want
    scale = 1.0 + (float(finite.abs().max()) if finite.numel() else 0.0)
    error = abs(got - expected)
    return error / scale if error == error else float("inf")


def _all_close(
    got: torch.Tensor, want: torch.Tensor, tolerance: Tolerance, slack: torch.Tensor | None
) -> bool:
    """The usual answer, found with few temporaries: every element within tolerance and
    no NaN anywhere. The same arithmetic, in the same order, as the full comparison
    below, which runs only when this says no (a NaN or infinity, or a real mismatch)."""
    excess = torch.sub(got, want).abs_()
    allowed = want.abs().mul_(tolerance.rtol).add_(tolerance.atol)
    if slack is not None and (slack.dim() == 0 or slack.shape == want.shape):
        allowed.add_(slack.to(torch.float64))
    excess.sub_(allowed)
    return not bool(_isnan(excess).any()) and not bool((excess > 0).any())
