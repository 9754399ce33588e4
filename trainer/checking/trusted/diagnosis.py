"""Name the classic mistake behind a wrong gradient, the way an interviewer would.

Given the true gradient and the learner's (and, where available, both again
for a second upstream gradient), try each classic mistake in turn: forgetting
``grad_output``, a flipped sign, a constant factor, a transpose, a missing sum
over the batch, all zeros. When none fits, say so plainly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from trainer.checking.trusted.compare import shape_text
from trainer.vocabulary import MISTAKES

# Kept before any learner code runs, so a patched torch cannot change a diagnosis.
_allclose = torch.allclose
_topk = torch.topk
_unravel = torch.unravel_index

VIEW_SIZE = 5

# What a mistake is called and how it reads: one vocabulary, trainer.vocabulary.
EXPLANATIONS = MISTAKES


@dataclass(frozen=True)
class Diagnosis:
    mistake: str
    input: str
    text: str
    view: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"mistake": self.mistake, "input": self.input, "text": self.text, "view": self.view}


def _close(a: torch.Tensor, b: torch.Tensor, rtol: float, atol: float) -> bool:
    return a.shape == b.shape and bool(_allclose(a, b, rtol=rtol, atol=atol, equal_nan=False))


def compact_view(expected: torch.Tensor, got: torch.Tensor) -> list[dict[str, Any]]:
    """At most five elements, the largest errors first: index, expected, got."""
    if expected.shape != got.shape or expected.numel() == 0:
        return []
    error = (got.double() - expected.double()).abs().reshape(-1)
    error = torch.nan_to_num(error, nan=float("inf"))
    count = min(VIEW_SIZE, error.numel())
    view = []
    for flat in _topk(error, count).indices.tolist():
        index = [int(i) for i in _unravel(torch.tensor(flat), expected.shape)]
        view.append(
            {
                "index": index,
                "expected": float(expected.reshape(-1)[flat]),
                "got": float(got.reshape(-1)[flat]),
            }
        )
    return view


def _is_masked(want: torch.Tensor, upstream: torch.Tensor, atol: float) -> bool:
    """Every element either zero or the upstream gradient itself: a mask, nothing smooth."""
    g = upstream.detach().double()
    return bool(((want.abs() <= atol) | ((want - g).abs() <= atol + 1e-4 * g.abs())).all())


def classify(
    expected: torch.Tensor,
    got: torch.Tensor,
    *,
    expected_other: torch.Tensor | None = None,
    got_other: torch.Tensor | None = None,
    upstream: torch.Tensor | None = None,
    rtol: float = 1e-4,
    atol: float = 1e-6,
) -> tuple[str, str]:
    """The mistake that turns ``expected`` into ``got``, with a sentence about it.

    ``*_other`` are the same gradients for a second, different upstream
    gradient; with them a backward that ignores ``grad_output`` is recognised.
    """
    want = expected.detach().double()
    have = got.detach().double()
    if have.shape != want.shape:
        swapped = have.dim() >= 2 and tuple(have.mT.shape) == tuple(want.shape)
        if swapped and _close(have.mT, want, rtol, atol):
            return "transposed", EXPLANATIONS["transposed"] + f" (shape {shape_text(have.shape)})"
        if have.numel() == want.numel() and _close(have.reshape(want.shape), want, rtol, atol):
            return (
                "wrong_shape",
                "drop the extra size-1 dimension (sum without keepdim, or squeeze)",
            )
        if have.numel() > want.numel():
            try:
                summed = have.sum_to_size(want.shape)
            except RuntimeError:
                summed = None
            if summed is not None and _close(summed, want, rtol, atol):
                return "not_summed_over_batch", EXPLANATIONS["not_summed_over_batch"]
        return "unknown", EXPLANATIONS["unknown"]
    if float(want.abs().max()) > atol and float(have.abs().max()) == 0.0:
        return "all_zeros", EXPLANATIONS["all_zeros"]
    if (
        expected_other is not None
        and got_other is not None
        and got_other.shape == got.shape
        and _close(got_other.detach().double(), have, rtol, atol)
        and not _close(expected_other.detach().double(), want, rtol, atol)
    ):
        return "no_grad_output", EXPLANATIONS["no_grad_output"]
    if _close(have, -want, rtol, atol):
        return "sign_flipped", EXPLANATIONS["sign_flipped"]
    if (
        upstream is not None
        and upstream.shape == want.shape
        and _is_masked(want, upstream, atol)
        and (
            _close(have + want, upstream.detach().double(), rtol, atol)
            and bool((want.abs() > atol).any())
        )
    ):
        return "inverted_mask", EXPLANATIONS["inverted_mask"]
    flat = want.abs() <= atol
    if bool(flat.any()) and not bool(flat.all()):
        right_where_sloped = _close(have[~flat], want[~flat], rtol, atol)
        if right_where_sloped and float(have[flat].abs().max()) > atol:
            return "missing_mask", EXPLANATIONS["missing_mask"]
    denominator = float((want * want).sum())
    if denominator > 0:
        factor = float((have * want).sum()) / denominator
        if (
            abs(factor - 1) > 1e-3
            and abs(factor) > 1e-6
            and _close(have, factor * want, rtol, atol)
        ):
            return (
                "constant_factor",
                f"the gradient is off by a constant factor: {factor:.4g} times the right one",
            )
    if have.dim() >= 2 and have.shape[-1] == have.shape[-2] and _close(have.mT, want, rtol, atol):
        return "transposed", EXPLANATIONS["transposed"]
    return "unknown", EXPLANATIONS["unknown"]


def diagnose(
    name: str,
    expected: torch.Tensor,
    got: torch.Tensor,
    *,
    expected_other: torch.Tensor | None = None,
    got_other: torch.Tensor | None = None,
    upstream: torch.Tensor | None = None,
    rtol: float = 1e-4,
    atol: float = 1e-6,
) -> Diagnosis:
    mistake, text = classify(
        expected,
        got,
        expected_other=expected_other,
        got_other=got_other,
        upstream=upstream,
        rtol=rtol,
        atol=atol,
    )
    return Diagnosis(mistake=mistake, input=name, text=text, view=compact_view(expected, got))


def view_lines(diagnosis: Diagnosis) -> list[str]:
    """The compact view as short lines for the table."""
    lines = []
    for item in diagnosis.view:
        index = "[" + ", ".join(map(str, item["index"])) + "]"
        lines.append(
            f"  {diagnosis.input}{index}: expected {item['expected']:.6g}, got {item['got']:.6g}"
        )
    return lines
