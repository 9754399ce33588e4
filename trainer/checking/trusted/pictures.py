"""Pictures of a learner's gradient against the right one, made in the checker.

Turns tensors into the small plain data of :mod:`trainer.checking.picture_data`
(a few kB, a few ms), which the CLI draws without torch:

* element-wise exercises get a ``curve``: the local derivative, gradient ÷
  upstream gradient, over the input values, with the kinks marked;
* other exercises get an ``error_map`` per input: which elements are wrong,
  max-pooled down to at most 20 × 60 cells.

Each picture carries a one-line ``pattern``: what it shows and the classic
mistake that suggests (as :func:`~trainer.checking.trusted.diagnosis.classify`
names it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch

from trainer.checking.picture_data import (
    CURVE_POINTS,
    FORMAT_VERSION,
    MAP_COLUMNS,
    MAP_ROWS,
    NOT_FINITE,
    CurvePicture,
    ErrorMapPicture,
    Kink,
    Picture,
)
from trainer.checking.trusted.diagnosis import classify

# Upstream values below this fraction of the largest one are left out of a
# curve: a gradient divided by a near-zero upstream value is noise.
UPSTREAM_FLOOR = 1e-3

# The classic mistake a picture suggests, after what it shows.
GUESSES = {
    "constant_factor": "a constant factor?",
    "sign_flipped": "a flipped sign?",
    "transposed": "transposed?",
    "not_summed_over_batch": "not summed over the batch?",
    "missing_mask": "a missing mask?",
    "inverted_mask": "an inverted mask?",
    "all_zeros": "no gradient computed?",
    "no_grad_output": "grad_output not multiplied in?",
}
MATCHES = "matches the right one everywhere"


def _significant(value: float, digits: int = 4) -> float:
    return float(f"{value:.{digits}g}")


def _classification_tolerance(rtol: float, atol: float) -> tuple[float, float]:
    """Looser than the check, as the backward stage diagnoses: a mistake, not rounding."""
    return max(rtol * 100, 1e-4), max(atol * 100, 1e-6)


def _excess(expected: torch.Tensor, got: torch.Tensor, rtol: float, atol: float) -> torch.Tensor:
    """|got − expected| ÷ the tolerance, per element; inf where one is NaN or infinite."""
    error = (got - expected).abs() / (atol + rtol * expected.abs())
    same = (got == expected) | (got.isnan() & expected.isnan())
    error = torch.where(same, torch.zeros_like(error), error)
    return torch.nan_to_num(error, nan=math.inf)


def _mistake(
    expected: torch.Tensor,
    got: torch.Tensor,
    upstream: torch.Tensor | None,
    rtol: float,
    atol: float,
) -> str:
    loose_rtol, loose_atol = _classification_tolerance(rtol, atol)
    mistake, _ = classify(expected, got, upstream=upstream, rtol=loose_rtol, atol=loose_atol)
    return mistake


def _factor(expected: torch.Tensor, got: torch.Tensor) -> float:
    denominator = float((expected * expected).sum())
    return float((got * expected).sum()) / denominator if denominator else math.nan


def _number_text(value: float) -> str:
    return f"{value:.4g}"


def _segments_text(name: str, kinks: Sequence[float], right: Sequence[bool]) -> str:
    """Where the right segments are, e.g. "0 < x < 0.5" or "x > 0 or x < -1"."""
    parts = []
    for index, is_right in enumerate(right):
        if not is_right:
            continue
        low = kinks[index - 1] if index > 0 else None
        high = kinks[index] if index < len(kinks) else None
        if low is not None and high is not None:
            parts.append(f"{_number_text(low)} < {name} < {_number_text(high)}")
        elif low is not None:
            parts.append(f"{name} > {_number_text(low)}")
        elif high is not None:
            parts.append(f"{name} < {_number_text(high)}")
    return " or ".join(parts)


def _curve_pattern(
    name: str,
    x: torch.Tensor,
    wrong: torch.Tensor,
    mistake: str,
    factor: float,
    kinks: Sequence[float],
) -> str:
    if not bool(wrong.any()):
        return MATCHES
    seen = ""
    if kinks:
        # Between the kinks, the learner is either right everywhere or not.
        edges = torch.tensor(sorted(set(kinks)), dtype=x.dtype)
        segment = torch.bucketize(x, edges)
        right = []
        for index in range(len(edges) + 1):
            inside = segment == index
            right.append(bool(inside.any()) and not bool(wrong[inside].any()))
        if any(right):
            seen = f"right only where {_segments_text(name, edges.tolist(), right)}"
    if mistake == "constant_factor":
        seen = f"off by the same factor ({factor:.3g}×) everywhere"
    elif mistake == "sign_flipped":
        seen = "the right slope with the opposite sign everywhere"
    elif mistake == "all_zeros":
        seen = "zero everywhere"
    elif mistake == "no_grad_output":
        seen = seen or "does not follow the upstream gradient"
    elif mistake in ("missing_mask", "inverted_mask") and not seen:
        seen = (
            "wrong exactly where the right slope is zero"
            if mistake == "missing_mask"
            else "non-zero exactly where the right slope is zero"
        )
    if not seen:
        seen = f"wrong at {int(wrong.sum())} of {wrong.numel()} elements"
    guess = GUESSES.get(mistake)
    return f"{seen}: {guess}" if guess else seen


def _worst_per_bin(inputs: torch.Tensor, gap: torch.Tensor, points: int) -> torch.Tensor:
    """Indices of at most ``points`` elements, by ascending input: each bin's worst.

    The bins split the range of the inputs evenly; within one, the element
    whose two slopes differ most stands for it, so no wrong element hides.
    Linear in the number of elements (no sort of them all).
    """
    count = inputs.numel()
    if count <= points:
        return torch.argsort(inputs, stable=True)
    low, high = float(inputs.min()), float(inputs.max())
    spread = high - low if high > low else 1.0
    bins = ((inputs - low) / spread * points).long().clamp(0, points - 1)
    worst = torch.full((points,), -1.0, dtype=gap.dtype).scatter_reduce(0, bins, gap, "amax")
    candidates = torch.nonzero(gap == worst[bins]).squeeze(1)
    first = torch.full((points,), count, dtype=torch.long).scatter_reduce(
        0, bins[candidates], candidates, "amin"
    )
    return first[first < count]


def curve(
    name: str,
    x: torch.Tensor,
    expected: torch.Tensor,
    got: torch.Tensor,
    upstream: torch.Tensor | None,
    *,
    rtol: float,
    atol: float,
    kinks: Sequence[tuple[float, str]] = (),
    mistake: str | None = None,
    points: int = CURVE_POINTS,
) -> CurvePicture | None:
    """The local derivative over the input values, for an element-wise exercise.

    ``x`` is the input, ``expected`` and ``got`` the right and the learner's
    gradients for it, ``upstream`` the gradient of the output (None: ones);
    all of one shape. ``kinks`` are (value, label) pairs, e.g. (0.5,
    "clip_val"). ``mistake`` is the diagnosis already made, if any. None when
    there is nothing to draw (shapes differ, no usable element).
    """
    if not (
        isinstance(got, torch.Tensor)
        and got.shape == expected.shape == x.shape
        and (upstream is None or upstream.shape == x.shape)
        and x.is_floating_point()
        and got.dtype.is_floating_point
    ):
        return None
    inputs = x.detach().double().reshape(-1)
    want = expected.detach().double().reshape(-1)
    have = got.detach().double().reshape(-1)
    scale = torch.ones_like(want) if upstream is None else upstream.detach().double().reshape(-1)
    floor = UPSTREAM_FLOOR * float(scale.abs().max()) if scale.numel() else 0.0
    usable = (scale.abs() > floor) & inputs.isfinite() & want.isfinite()
    if not bool(usable.any()):
        return None
    if mistake is None:
        mistake = _mistake(
            expected.detach().double(),
            got.detach().double(),
            None if upstream is None else upstream.detach().double(),
            rtol,
            atol,
        )
    inputs, want, have, scale = inputs[usable], want[usable], have[usable], scale[usable]
    wrong = _excess(want, have, rtol, atol) > 1
    slope_want, slope_have = want / scale, have / scale
    gap = torch.nan_to_num((slope_have - slope_want).abs(), nan=math.inf)

    chosen = _worst_per_bin(inputs, gap, points)
    factor = _factor(want, have) if mistake == "constant_factor" else math.nan
    kink_values = [float(value) for value, _ in kinks if math.isfinite(value)]
    return CurvePicture(
        kind="curve",
        version=FORMAT_VERSION,
        input=name,
        x=[_significant(v) for v in inputs[chosen].tolist()],
        expected=[_significant(v) for v in slope_want[chosen].tolist()],
        got=[_significant(v) if math.isfinite(v) else None for v in slope_have[chosen].tolist()],
        kinks=[
            Kink(x=_significant(value), label=label)
            for value, label in kinks
            if math.isfinite(value)
        ],
        wrong=int(wrong.sum()),
        total=int(wrong.numel()),
        pattern=_curve_pattern(name, inputs, wrong, mistake, factor, kink_values),
    )


def _as_grid(tensor: torch.Tensor) -> torch.Tensor:
    """Rows × columns: every dimension but the last, by the last."""
    if tensor.dim() == 0:
        return tensor.reshape(1, 1)
    if tensor.dim() == 1:
        return tensor.reshape(1, -1)
    return tensor.reshape(-1, tensor.shape[-1])


def _cell_rows(excess: torch.Tensor) -> list[str]:
    """Each cell as a character: "0" within tolerance, "d" for 10^(d-1) ≤ excess < 10^d."""
    finite = excess.isfinite()
    safe = torch.where(finite & (excess > 1), excess, torch.ones_like(excess))
    decades = (torch.floor(torch.log10(safe)) + 1).clamp(max=9)
    decades = torch.where(excess > 1, decades, torch.zeros_like(decades))
    return [
        "".join(str(int(d)) if ok else NOT_FINITE for d, ok in zip(row, row_ok, strict=True))
        for row, row_ok in zip(decades.tolist(), finite.tolist(), strict=True)
    ]


def _map_pattern(
    want: torch.Tensor,
    have: torch.Tensor,
    expected_shape: torch.Size,
    got_shape: torch.Size,
    wrong: torch.Tensor,
    mistake: str,
) -> str:
    if not bool(wrong.any()):
        return MATCHES
    grid = _as_grid(wrong)
    seen = ""
    if mistake == "constant_factor":
        seen = f"off by the same factor ({_factor(want, have):.3g}×) everywhere"
    elif mistake == "sign_flipped":
        seen = "the right size with the opposite sign everywhere"
    elif mistake == "all_zeros":
        seen = "zero everywhere"
    elif mistake == "no_grad_output":
        seen = "does not follow the upstream gradient"
    elif mistake == "missing_mask":
        seen = "wrong exactly where the right gradient is zero"
    elif mistake == "inverted_mask":
        seen = "non-zero exactly where the right gradient is zero, and zero elsewhere"
    elif mistake == "transposed":
        square = want.dim() >= 2 and want.shape[-1] == want.shape[-2]
        diagonal = square and not bool(wrong.diagonal(dim1=-2, dim2=-1).any())
        seen = "right only on the diagonal" if diagonal else "the right values in swapped places"
    elif mistake == "not_summed_over_batch":
        extra = len(got_shape) - len(expected_shape)
        seen = (
            "every row wrong, yet the rows sum to the right one"
            if extra == 1 and len(got_shape) == 2
            else "wrong, but summed over the extra dimensions it is right"
        )
    elif bool(grid.all()):
        seen = f"wrong at every element ({wrong.numel()} of {wrong.numel()})"
    elif grid.shape[0] > 1 and bool((grid.all(dim=0) | ~grid.any(dim=0)).all()):
        count = int(grid.all(dim=0).sum())
        seen = f"whole columns wrong ({count} of {grid.shape[1]})"
    elif grid.shape[1] > 1 and bool((grid.all(dim=1) | ~grid.any(dim=1)).all()):
        count = int(grid.all(dim=1).sum())
        seen = f"whole rows wrong ({count} of {grid.shape[0]})"
    else:
        seen = f"wrong at {int(wrong.sum())} of {wrong.numel()} elements"
    guess = GUESSES.get(mistake)
    return f"{seen}: {guess}" if guess else seen


def error_map(
    name: str,
    expected: torch.Tensor,
    got: torch.Tensor,
    *,
    rtol: float,
    atol: float,
    upstream: torch.Tensor | None = None,
    mistake: str | None = None,
    rows: int = MAP_ROWS,
    columns: int = MAP_COLUMNS,
) -> ErrorMapPicture | None:
    """Which elements of one input's gradient are wrong, max-pooled to a small grid.

    A learner's gradient of another shape is compared where the two broadcast
    (a bias gradient left as (B, out) against (out,)); None when they do not.
    ``upstream`` (the output's gradient) helps name a mask mistake.
    """
    if not isinstance(got, torch.Tensor) or got.is_complex() or expected.is_complex():
        return None
    want = expected.detach().double()
    have = got.detach().double()
    if mistake is None:
        mistake = _mistake(want, have, upstream, rtol, atol)
    try:
        want_wide, have_wide = torch.broadcast_tensors(want, have)  # type: ignore[no-untyped-call]
    except RuntimeError:
        return None
    shape = want_wide.shape
    if shape.numel() == 0:
        return None
    excess = _excess(want_wide, have_wide, rtol, atol)
    wrong = excess > 1
    grid = _as_grid(excess)
    block = (math.ceil(grid.shape[0] / rows), math.ceil(grid.shape[1] / columns))
    pooled = torch.nn.functional.max_pool2d(
        grid[None, None], kernel_size=block, stride=block, ceil_mode=True
    )[0, 0]
    worst = float(excess.max())
    return ErrorMapPicture(
        kind="error_map",
        version=FORMAT_VERSION,
        input=name,
        shape=list(shape),
        grid=list(pooled.shape),
        block=list(block),
        cells=_cell_rows(pooled),
        worst=_significant(worst, 3) if math.isfinite(worst) else None,
        wrong=int(wrong.sum()),
        total=wrong.numel(),
        pattern=_map_pattern(want, have, want.shape, have.shape, wrong, mistake),
    )


def gradient_pictures(
    inputs: Mapping[str, object],
    expected: Mapping[str, torch.Tensor],
    got: Mapping[str, object],
    upstream: torch.Tensor | None,
    *,
    elementwise: bool,
    rtol: float,
    atol: float,
    kinks: Mapping[str, Sequence[tuple[float, str]]] | None = None,
    mistakes: Mapping[str, str] | None = None,
    only_wrong: bool = True,
) -> list[Picture]:
    """The pictures of one run, in the order of ``expected`` (the inputs that need a gradient).

    ``inputs``: forward's arguments by parameter name; ``expected`` and
    ``got``: the right and the learner's gradients by name (``got`` may hold
    anything the learner returned); ``upstream``: the output's gradient
    (None when the function has several outputs); ``kinks``: (value, label)
    pairs per input; ``mistakes``: diagnoses already made, by input name.
    With ``only_wrong``, inputs whose gradient is right get no picture.
    """
    pictures: list[Picture] = []
    for name, want in expected.items():
        have = got.get(name)
        if not isinstance(have, torch.Tensor):
            continue
        mistake = (mistakes or {}).get(name)
        picture: Picture | None = None
        x = inputs.get(name)
        if elementwise and isinstance(x, torch.Tensor):
            picture = curve(
                name,
                x,
                want,
                have,
                upstream,
                rtol=rtol,
                atol=atol,
                kinks=(kinks or {}).get(name, ()),
                mistake=mistake,
            )
        if picture is None:
            local_upstream = (
                upstream if upstream is not None and upstream.shape == want.shape else None
            )
            picture = error_map(
                name, want, have, rtol=rtol, atol=atol, upstream=local_upstream, mistake=mistake
            )
        if picture is not None and (picture["wrong"] or not only_wrong):
            pictures.append(picture)
    return pictures
