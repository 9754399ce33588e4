"""Detect code in Markdown: fenced blocks, and inline spans that read as Python."""

from __future__ import annotations

import ast
import re

# --- code in Markdown ---------------------------------------------------------------

_FENCE = re.compile(r"^\s*(```|~~~)", re.MULTILINE)
_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.DOTALL)
# Python that is not math: a module or ctx attribute, a statement keyword, a method
# call, a keyword argument, a tensor transpose attribute, the matrix-product operator.
_PYTHON_SIGNS = (
    re.compile(r"\b(?:torch|ctx|F|nn|np|math|self)\.[A-Za-z_]"),
    re.compile(r"\b(?:return|import|def|lambda|raise|yield)\b"),
    re.compile(r"[\w)\]]\.[A-Za-z_]\w*\("),  # x.sum(  (a).mean(  t[0].clone(
    re.compile(r"[(,]\s*[A-Za-z_]\w*=(?!=)"),  # (dim=1  , keepdim=True
    re.compile(r"[\w)\]]\.m?T\b"),  # w.T  x.mT
    re.compile(r"\s@\s"),  # a @ b
)
# A target that reads as a variable of a program rather than a symbol of maths:
# a tuple (a, b = ...), a subscript or attribute (g[i] = ..., ctx.k = ...), or a
# name of four or more characters (grad = ..., du_dx = ...). One-letter names and
# short subscripted symbols (y = ..., y_i = ..., dL = ...) are maths.
_PROGRAM_NAME = re.compile(r"^[A-Za-z_]\w{3,}$")


def _is_assignment(span: str) -> bool:
    """True when ``span`` parses as a Python assignment to a program-like target."""
    try:
        module = ast.parse(span.strip())
    except (SyntaxError, ValueError, RecursionError):
        return False
    if len(module.body) != 1:
        return len(module.body) > 1  # several statements: a program
    statement = module.body[0]
    if isinstance(statement, ast.AugAssign | ast.AnnAssign):
        return True
    if not isinstance(statement, ast.Assign):
        return False
    for target in statement.targets:
        if isinstance(target, ast.Tuple | ast.List | ast.Subscript | ast.Attribute | ast.Starred):
            return True
        if isinstance(target, ast.Name) and _PROGRAM_NAME.match(target.id):
            return True
    return False


def index_notation(span: str) -> bool:
    """True for maths written with subscripts, ``out[i] = x[index[i]]``: an assignment
    whose targets are all subscripts. The last hint's rule counts it as code; before
    the last hint, and in a derivation, it is the math for one element."""
    try:
        module = ast.parse(span.strip())
    except (SyntaxError, ValueError, RecursionError):
        return False
    return (
        len(module.body) == 1
        and isinstance(module.body[0], ast.Assign)
        and all(isinstance(t, ast.Subscript) for t in module.body[0].targets)
    )


def span_is_code(span: str) -> bool:
    """True when an inline code span holds Python rather than maths.

    ``x.sum(dim=0)``, ``return g * y``, ``grad = probs.clone()`` and ``w.T @ g``
    are code; ``g · s · (1 − s)``, ``dL/dx = g · (1 − y²)``, ``y = 0.5 * x`` and
    ``y_i · (δ_ij − y_j)`` are maths.
    """
    if any(sign.search(span) for sign in _PYTHON_SIGNS):
        return True
    return _is_assignment(span)


def code_in(text: str) -> list[str]:
    """The pieces of Markdown ``text`` that are code: fenced blocks and code spans of Python."""
    if _FENCE.search(text):
        return ["a fenced code block"]
    return [span.strip() for _, span in _CODE_SPAN.findall(text) if span_is_code(span)]
