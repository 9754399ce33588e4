"""The worked derivation shown after a pass (``derivation:``, :mod:`trainer.explain`).

- ``derivation_missing``: the spec has none, so a learner's first pass shows nothing
  and ``trainer explain`` has nothing to say. A warning, not an error: a new
  exercise works without one, and validate says what it lacks.
- ``derivation_too_wide``: a line is wider than :data:`MAX_WIDTH` columns. The
  derivation is shown as laid out, never reflowed (it is math); at 80 columns a
  box takes 4 of them, and a wider line would be broken by the terminal.
- ``code_in_derivation``: a line reads as Python (``torch.``, ``ctx.``, a method call,
  a keyword argument, ``.T``, ``@``, ``return``, an assignment to a program variable:
  :func:`~trainer.content_rules.code.span_is_code`; index notation such as
  ``y[p] = x[index[p]]`` is maths) or there is a code span or fence. The derivation is math; the code is ``trainer solution``'s.
"""

from __future__ import annotations

import unicodedata

from trainer.content_rules.base import ContentWarning
from trainer.content_rules.code import code_in, index_notation, span_is_code
from trainer.spec import Exercise

RULE_DERIVATION_MISSING = "derivation_missing"
RULE_DERIVATION_TOO_WIDE = "derivation_too_wide"
RULE_CODE_IN_DERIVATION = "code_in_derivation"

MAX_WIDTH = 72  # columns of a derivation's line: a box at 80 columns holds 76


def width(line: str) -> int:
    """Terminal columns of ``line``: wide (East Asian) characters take two, combining
    marks none."""
    return sum(
        0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1
        for c in line
    )


def derivation_warnings(exercise: Exercise) -> list[ContentWarning]:
    text = exercise.derivation
    if not text.strip():
        return [
            ContentWarning(
                RULE_DERIVATION_MISSING,
                "derivation",
                "the spec has no worked derivation, shown after the first pass and by "
                "`trainer explain`: add `derivation:`, from the forward's definition to the "
                "formula backward computes, in math, with where learners go wrong",
            )
        ]
    warnings = []
    lines = text.expandtabs().splitlines()
    wide = [number for number, line in enumerate(lines, 1) if width(line) > MAX_WIDTH]
    if wide:
        warnings.append(
            ContentWarning(
                RULE_DERIVATION_TOO_WIDE,
                "derivation",
                f"{_lines(wide)} wider than {MAX_WIDTH} columns: it is shown as laid out, "
                "so break the line where the math allows",
            )
        )
    found = code_in(text) + [line.strip() for line in lines if line.strip() and _is_code(line)]
    if found:
        shown = ", ".join(
            f"`{piece}`" if piece != "a fenced code block" else piece for piece in found
        )
        if len(shown) > 120:
            shown = shown[:117] + "..."
        warnings.append(
            ContentWarning(
                RULE_CODE_IN_DERIVATION,
                "derivation",
                f"the derivation contains code ({shown}): write it in math notation "
                "(∂, Σ, ·, ᵀ, ⊙) and leave the code to `trainer solution`",
            )
        )
    return warnings


def _is_code(line: str) -> bool:
    # A bullet's marker is not part of what it says; index notation is maths.
    line = line.strip().removeprefix("•").removeprefix("-").strip()
    return span_is_code(line) and not index_notation(line)


def _lines(numbers: list[int]) -> str:
    if len(numbers) == 1:
        return f"line {numbers[0]} is"
    return "lines " + ", ".join(map(str, numbers[:-1])) + f" and {numbers[-1]} are"
