"""Hints that keep the answer for the last one, and statements that promise every stage.

- ``answer_before_last_hint``: a hint before the last holds code, an equation for the
  gradient of the loss (``dL/dx = ...``, ``∂L/∂x = ...``), or the last hint's formula
  itself. The ladder is idea, then math for one element, then the formula: the
  second hint may differentiate, it may not hand over the result.
- ``stage_not_in_statement``: the statement's "what the checker tests" does not name a
  stage the exercise runs, so a learner fails where no one warned them.
"""

from __future__ import annotations

import ast
import re

from trainer.content_rules.base import ContentWarning
from trainer.content_rules.code import code_in
from trainer.spec import Exercise
from trainer.vocabulary import stages_for

RULE_ANSWER_BEFORE_LAST_HINT = "answer_before_last_hint"
RULE_STAGE_NOT_IN_STATEMENT = "stage_not_in_statement"

# An equation for the gradient of the loss: dL/dx_k = ..., ∂L/∂W[j, k] = ...
_LOSS_GRADIENT = re.compile(r"(?:\bd|∂)L\s*/\s*(?:d|∂)[^=\n`]{0,40}?=(?!=)")
# The right side of such an equation, up to the end of its code span or clause.
_RIGHT_SIDE = re.compile(
    r"(?:\bd|∂)L\s*/\s*(?:d|∂)[^=\n`]{0,40}?=\s*([^`;\n]+?)(?:`|;|,\s|\.\s|\.$|$)"
)
# An upstream factor in front of a formula: g ·, g_i ·, grad_output *, γ ·
_UPSTREAM = re.compile(r"^(?:g\w*|grad_output\w*|grad_out\d|γ)(?:·|\*)")
_SHORTEST_BODY = 6  # a formula shorter than this ("y", "g") is no giveaway


def _squeeze(text: str) -> str:
    return re.sub(r"[\s`]+", "", text)


def last_formulas(hint: str) -> list[str]:
    """The right sides of the loss-gradient equations of ``hint``, squeezed, without a
    leading upstream factor: what an earlier hint must not already say."""
    bodies = []
    for match in _RIGHT_SIDE.finditer(hint):
        body = _UPSTREAM.sub("", _squeeze(match.group(1)))
        if len(body) >= _SHORTEST_BODY:
            bodies.append(body)
    return bodies


def _index_notation(span: str) -> bool:
    """True for maths written with subscripts, ``out[i] = x[index[i]]``: an assignment
    whose targets are all subscripts. The last hint's rule counts it as code; before
    the last hint it is the math for one element, which is allowed."""
    try:
        module = ast.parse(span.strip())
    except (SyntaxError, ValueError, RecursionError):
        return False
    return (
        len(module.body) == 1
        and isinstance(module.body[0], ast.Assign)
        and all(isinstance(t, ast.Subscript) for t in module.body[0].targets)
    )


def answer_before_last_hint_warnings(exercise: Exercise) -> list[ContentWarning]:
    hints = exercise.hints
    if len(hints) < 2:
        return []
    formulas = last_formulas(hints[-1])
    warnings = []
    for index, hint in enumerate(hints[:-1]):
        found = []
        code = [piece for piece in code_in(hint) if not _index_notation(piece)]
        if code:
            found.append("code (" + ", ".join(f"`{piece}`" for piece in code)[:80] + ")")
        if _LOSS_GRADIENT.search(hint):
            found.append("an equation for the gradient of the loss")
        squeezed = _squeeze(hint)
        if any(body in squeezed for body in formulas):
            found.append("the last hint's formula")
        if found:
            warnings.append(
                ContentWarning(
                    RULE_ANSWER_BEFORE_LAST_HINT,
                    f"hints[{index}]",
                    f"gives the answer before the last hint: {' and '.join(found)}. Keep the "
                    "ladder: the idea, then the math for one element, then the complete "
                    "formula in the last hint only",
                )
            )
    return warnings


# Words that name each stage in a statement (any one will do), by stage id.
STAGE_WORDS: dict[str, str] = {
    "load": r"\bloads?\b",
    "forward": r"\bforward\b",
    "backward": r"\bautograd's\b|\bautograd gets\b|backward parity",
    "contract": r"\bcontract\b",
    "mark_dirty": r"\bmark_dirty\b",
    "non_differentiable": r"non-differentiable|mark_non_differentiable",
    "jvp": r"\bjvp\b",
    "vmap": r"\bvmap\b",
    "by_hand": r"\bby hand\b",
    "state": r"\bcalls in a row\b|calls as in training",
    "kinks": r"\bkinks?\b",
    "stability": r"\bdomain\b",
    "gradcheck": r"\bgradcheck\b",
    "second_order": r"second derivatives",
    "double_backward": r"double backward|gradgradcheck",
    "cuda": r"\bCUDA\b|\bGPU\b",
    "opcheck": r"\bopcheck\b",
}
_CHECKER_SECTION = re.compile(r"what the checker tests|the checker (?:compares|tests|runs)", re.I)


def stage_naming_warnings(exercise: Exercise) -> list[ContentWarning]:
    """One warning naming every stage the exercise runs that its statement's "what the
    checker tests" (from its first mention of the checker on; else the whole
    statement) does not name."""
    statement = exercise.statement
    start = _CHECKER_SECTION.search(statement)
    section = " ".join((statement[start.start() :] if start else statement).split())
    missing = [
        stage
        for stage in stages_for(exercise, exercise.double_backward)
        if stage.id in STAGE_WORDS and not re.search(STAGE_WORDS[stage.id], section, re.I)
    ]
    if not missing:
        return []
    named = ", ".join(f"{s.id} ({s.title})" for s in missing)
    return [
        ContentWarning(
            RULE_STAGE_NOT_IN_STATEMENT,
            "statement",
            f"what the checker tests does not name every stage this exercise runs: {named}. "
            "Say what each checks, so that no stage fails a learner without warning",
        )
    ]
