"""The whiteboard's formula language (trainer.formula): what it reads, what it refuses and
where, and that no text typed at it ever runs as Python."""

from __future__ import annotations

import ast
import builtins
import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.conftest import CATALOG, REPO
from trainer.formula import (
    MAX_DEPTH,
    MAX_LENGTH,
    Binary,
    Call,
    Compare,
    Dims,
    FormulaError,
    Name,
    Number,
    Transpose,
    Unary,
    parse,
    understand,
)
from trainer.whiteboard import NotUnderstood, Right, Whiteboard

NAMES = ["x", "y", "g", "weight", "dim", "eps"]


def _shape_of(node: Any) -> Any:
    """A node without its positions: what the formula means."""
    if isinstance(node, Number):
        return node.value
    if isinstance(node, Name):
        return node.name
    if isinstance(node, Unary):
        return ("neg", _shape_of(node.operand))
    if isinstance(node, Binary | Compare):
        return (node.op, _shape_of(node.left), _shape_of(node.right))
    if isinstance(node, Transpose):
        return ("T", _shape_of(node.operand))
    if isinstance(node, Call):
        return (node.function, *map(_shape_of, node.args))
    assert isinstance(node, Dims)
    return tuple(map(_shape_of, node.items))


@pytest.mark.parametrize(
    ("text", "meaning"),
    [
        ("g * y * (1 - y)", ("*", ("*", "g", "y"), ("-", 1.0, "y"))),
        ("-x^2", ("neg", ("^", "x", 2.0))),
        ("-x**2", ("neg", ("^", "x", 2.0))),
        ("2^3^2", ("^", 2.0, ("^", 3.0, 2.0))),
        ("x^-1 * y", ("*", ("^", "x", ("neg", 1.0)), "y")),
        ("x - y - g", ("-", ("-", "x", "y"), "g")),
        ("gᵀ @ x", ("@", ("T", "g"), "x")),
        ("g.T @ x", ("@", ("T", "g"), "x")),
        ("g · σ(x)²", ("*", "g", ("^", ("sigmoid", "x"), 2.0))),
        ("x − y", ("-", "x", "y")),
        ("g * (x > 0)", ("*", "g", (">", "x", 0.0))),
        ("where(x ≥ 0, g, 0.01 * g)", ("where", (">=", "x", 0.0), "g", ("*", 0.01, "g"))),
        ("sum(g * y, dim)", ("sum", ("*", "g", "y"), "dim")),
        ("sum(g, (0, 1))", ("sum", "g", (0.0, 1.0))),
        ("mean(x, -1)", ("mean", "x", ("neg", 1.0))),
        ("1e-3 * x + .5", ("+", ("*", 0.001, "x"), 0.5)),
        ("dL/dx = g * y", ("*", "g", "y")),
        ("grad_x = 2 * pi", ("*", 2.0, "pi")),
        ("onehot(y, size(x, -1))", ("onehot", "y", ("size", "x", ("neg", 1.0)))),
        ("sum(g, all_but(1))", ("sum", "g", ("all_but", 1.0))),
        ("mean(g, all_but((0, dim)))", ("mean", "g", ("all_but", (0.0, "dim")))),
        ("reshape(weight, tril(x))", ("reshape", "weight", ("tril", "x"))),
    ],
)
def test_the_parser_reads_formulas_as_they_are_written_on_a_whiteboard(text, meaning):
    assert _shape_of(understand(text, NAMES)) == meaning


@pytest.mark.parametrize(
    ("text", "at", "words"),
    [
        ("g * y * (1 - y", 14, "expected `)` to close the `(`"),
        ("g * y)", 5, "this `)` closes nothing"),
        ("2x", 1, "write * between factors"),
        ("g y", 2, "write * between factors"),
        ("g * ", 4, "the formula ends too soon"),
        ("", 0, "the formula is empty"),
        ("g[0]", 1, "indexing is not part of a formula"),
        ("x.shape", 1, "only .T (the transpose) may follow a dot"),
        ("g * 'y'", 4, "text in quotes"),
        ("dx := g", 3, "`:` is not part of a formula"),
        ("g = y", 2, "a formula has no ="),
        ("x < y < g", 6, "one comparison at a time"),
        ("g * z", 4, "unknown name `z`"),
        ("g * wieght", 4, "did you mean `weight`?"),
        ("g * exp", 4, "`exp` is a function: write exp(…)"),
        ("g * y(1 - y)", 4, "`y` is not a function: write y * (…)"),
        ("g * sigmod(x)", 4, "unknown function `sigmod`; did you mean `sigmoid`?"),
        ("exp(x, y)", 0, "exp takes 1 argument"),
        ("sum(g, 0.5)", 7, "a dimension is a whole number"),
        ("sum(g, y)", 7, ""),  # a name passes here; the evaluator holds it to being an int
        ("g * (0, 1)", 4, "a list like (0, 1) only gives the dimensions"),
        ("softmax(x, (0, 1))", 11, "a dimension is a whole number such as -1, or the name of one"),
        ("sum_to(g, 2 * x)", 10, "the second argument of sum_to is the name of an input"),
        ("g ** * y", 5, "expected a number, a name or ( here, found `*`"),
        ("g % y", 2, "`%` is not part of a formula"),
        ("g * all_but(1)", 4, "all_but(…) only gives the dimensions of a sum"),
        ("softmax(x, all_but(1))", 11, "a dimension is a whole number such as -1"),
        ("size(x, (0, 1))", 8, "a dimension is a whole number such as -1, or the name of one"),
        ("sum(g, all_but(1, 2))", 7, "all_but takes 1 argument"),
        ("sum(g, all_but(all_but(1)))", 15, "a dimension is a whole number"),
        ("sum(g, all_but(0.5))", 15, "a dimension is a whole number"),
        ("onehot(y)", 0, "onehot takes 2 arguments"),
    ],
)
def test_a_formula_that_is_not_understood_says_where_reading_stopped(text, at, words):
    if not words:
        understand(text, NAMES)
        return
    with pytest.raises(FormulaError) as caught:
        understand(text, NAMES)
    assert words in caught.value.message
    assert caught.value.start == at


def test_a_very_long_or_deeply_nested_formula_is_refused_without_a_recursion_error():
    with pytest.raises(FormulaError, match=f"at most {MAX_LENGTH} characters"):
        parse("x + " * 200 + "x")
    with pytest.raises(FormulaError, match=f"nested more than {MAX_DEPTH} deep"):
        parse("(" * 100 + "x" + ")" * 100)
    with pytest.raises(FormulaError, match="nested more than"):
        parse("-" * 300 + "x")
    with pytest.raises(FormulaError, match="nested more than"):
        parse("2^" * 150 + "2")
    # Long but flat is fine: a left-leaning chain is read in a loop.
    assert isinstance(parse("x+" * 150 + "x"), Binary)


# Never Python.

# Texts that are Python (and harmful or revealing if Python ran them), each of which the
# formula language must refuse as not understood.
AS_PYTHON = [
    "__import__('os').system('x')",
    "__import__",
    "().__class__.__bases__",
    "().__class__.__bases__[0].__subclasses__()",
    "lambda: 1",
    "(lambda: 1)()",
    "x.__class__",
    "x.__dict__",
    "x.grad_fn",
    "g.T.__class__",
    "open('f')",
    "open(f)",
    "exec('1')",
    "eval('g')",
    "compile('1', 'f', 'eval')",
    "globals()",
    "getattr(x, 'T')",
    "breakpoint()",
    "[c for c in ().__class__.__base__.__subclasses__()]",
    "import os",
    "x if True else y",
    "x and y",
    "not x",
    "f'{x}'",
    "g; import os",
    "g\nimport os",
    "# comment",
    "x[0]",
    "{1: 2}",
    "*x",
    "x @= g",
    "print(x)",
    "torch.exp(x)",
    "math.pi",
    "__builtins__",
    "sum.__self__",
    "sum(g, __import__('os'))",
    "onehot(x, __import__('os'))",
    "reshape(x, x.__class__)",
    "size(x, x.ndim)",
    "tril(x)[0]",
    "sum(g, all_but(__import__('os')))",
    "sum(g, all_but(x.shape))",
    "(" * 5000 + "x" + ")" * 5000,
    "x" * 100_000,
    "-" * 100_000 + "x",
]


@contextlib.contextmanager
def python_watched() -> Iterator[list[str]]:
    """Every way to run text, and the harm such text would do, replaced by a recorder
    (that also refuses) inside the block: what it records was run. Restored on leaving,
    before any assertion (pytest imports as it reports)."""
    ran: list[str] = []

    def recorder(name: str) -> Callable[..., Any]:
        def record(*args: Any, **kwargs: Any) -> Any:
            ran.append(name)
            raise AssertionError(f"{name} was called")

        return record

    real_import = builtins.__import__

    def importing(name: str, *args: Any, **kwargs: Any) -> Any:
        # torch imports its own modules from C as it computes (torch.tensor does): those
        # pass; any other import is recorded and refused.
        if name == "torch" or name.startswith("torch."):
            return real_import(name, *args, **kwargs)
        return recorder("__import__")(name)

    watched = [(builtins, n) for n in ("eval", "exec", "compile", "open", "breakpoint")]
    watched += [(builtins, "globals"), (os, "system")]
    saved = [(owner, name, getattr(owner, name)) for owner, name in watched]
    saved.append((builtins, "__import__", real_import))
    try:
        for owner, name in watched:
            setattr(owner, name, recorder(name))
        builtins.__import__ = importing
        yield ran
    finally:
        for owner, name, value in saved:
            setattr(owner, name, value)


@pytest.fixture(scope="module")
def sigmoid_board() -> Whiteboard:
    return Whiteboard(CATALOG.get("sigmoid"))


@pytest.mark.parametrize("text", AS_PYTHON, ids=lambda t: t[:40])
def test_text_that_is_python_is_never_run_and_is_not_understood(
    text: str, sigmoid_board: Whiteboard
):
    with python_watched() as ran:
        verdict = sigmoid_board.judge("x", text)
    assert ran == []
    assert isinstance(verdict, NotUnderstood), verdict
    assert verdict.error.message
    assert 0 <= verdict.error.start <= len(text)


def test_a_right_formula_is_judged_with_every_way_to_run_text_switched_off(
    sigmoid_board: Whiteboard,
):
    """The control: the recorders do not stop a formula from being judged, and they do
    record a call (a judge that ran text would be seen)."""
    with python_watched() as ran:
        verdict = sigmoid_board.judge("x", "g * sigmoid(x) * (1 - sigmoid(x))")
        with pytest.raises(AssertionError):
            eval("1")
    assert isinstance(verdict, Right)
    assert ran == ["eval"]


# What may run text, named once: a call of any of these in the modules that read or
# evaluate a formula would hand the learner's text to Python (``re.compile`` compiles a
# pattern of ours, not text: a method called compile is not a call of the builtin).
RUNS_TEXT = {"eval", "exec", "compile", "__import__", "getattr", "breakpoint"}
RUNS_TEXT_METHODS = {"literal_eval", "import_module", "system", "popen"}
FORMULA_MODULES = [
    "formula.py",
    "formula_torch.py",
    "whiteboard.py",
    "derive.py",
    "commands/derive.py",
]


def _runs_text(source: str) -> set[str]:
    """The calls of ``source`` that could run text."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            function = node.func
            if isinstance(function, ast.Name) and function.id in RUNS_TEXT:
                found.add(function.id)
            elif isinstance(function, ast.Attribute) and function.attr in RUNS_TEXT_METHODS:
                found.add(function.attr)
        if isinstance(node, ast.Import | ast.ImportFrom):
            modules = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
            found |= {m for m in modules if m in ("importlib", "builtins", "pickle", "marshal")}
    return found


@pytest.mark.parametrize("module", FORMULA_MODULES)
def test_the_modules_that_read_formulas_call_nothing_that_runs_text(module: str):
    assert _runs_text((REPO / "trainer" / module).read_text()) == set()


def test_the_scan_sees_a_call_that_runs_text():
    """The scan above is not blind: a parser that evals its input fails it."""
    assert _runs_text("def parse(text):\n    return eval(text)\n") == {"eval"}
    assert _runs_text("import ast\nast.literal_eval(text)\n") == {"literal_eval"}
    assert _runs_text("import importlib\n") == {"importlib"}
    assert _runs_text("import re\nre.compile('x')\n") == set()


# What the functions of the losses, the normalisations and attention compute.


def _value(text: str, **scope: Any) -> Any:
    import torch

    from trainer.formula_torch import evaluate

    values = {
        name: torch.tensor(value, dtype=torch.float64) if isinstance(value, list) else value
        for name, value in scope.items()
    }
    return evaluate(understand(text, list(values)), values)


def test_onehot_puts_a_1_at_each_index_and_a_row_of_zeros_for_one_outside_the_classes():
    value = _value("onehot(t, 3)", t=[0.0, 2.0, -100.0])
    assert value.tolist() == [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]]
    assert _value("onehot(t, size(x, -1))", t=[[1.0]], x=[[5.0, 6.0]]).tolist() == [[[0.0, 1.0]]]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("onehot(t, 2.5)", "the number of classes C is one whole number"),
        ("onehot(t, t)", "the number of classes C is one whole number"),
        ("onehot(t, 0)", "the number of classes C is one whole number"),
        ("onehot(t, 1e9)", "a one-hot of more than"),
        ("size(2, 0)", "a number has no dimensions"),
        ("size(t, 1)", "dimension 1 does not exist"),
        ("tril(t)", "tril needs two dimensions or more"),
        ("reshape(t, 1)", "they differ in their number of elements"),
    ],
)
def test_a_function_given_what_it_cannot_take_is_an_evaluation_error(text, words):
    from trainer.formula import EvaluationError

    with pytest.raises(EvaluationError) as caught:
        _value(text, t=[0.0, 1.0, 2.0])
    assert words in caught.value.message


def test_size_tril_and_reshape_compute_what_torch_does():
    x = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    assert float(_value("size(x, -1) * 10 + size(x, 0)", x=x)) == 32.0
    assert _value("tril(x)", x=x).tolist() == [[1.0, 0.0, 0.0], [4.0, 5.0, 0.0]]
    assert _value("reshape(x, tril(xᵀ))", x=x).shape == (3, 2)


def test_all_but_reduces_every_dimension_but_those_listed_whatever_the_rank():
    import torch

    four = torch.arange(24.0, dtype=torch.float64).reshape(2, 3, 2, 2)
    assert _value("sum(x, all_but(1))", x=four).shape == (1, 3, 1, 1)
    assert _value("sum(x, all_but(1))", x=four).flatten().tolist() == [60.0, 92.0, 124.0]
    assert _value("mean(x, all_but((0, -1)))", x=four).shape == (2, 1, 1, 2)
    two = [[1.0, 2.0], [3.0, 5.0]]
    assert _value("sum(x, all_but(1))", x=two).tolist() == [[4.0, 7.0]]
    # Leaving every dimension out reduces over none: the value itself (no variance).
    assert _value("sum(x, all_but((0, 1)))", x=two).tolist() == two
    assert _value("var(x, all_but((0, 1)))", x=two).tolist() == [[0.0, 0.0], [0.0, 0.0]]


def test_where_with_a_number_as_condition_computes_only_the_value_it_chooses():
    from trainer.formula import EvaluationError

    x = [[1.0, 2.0], [3.0, 4.0]]
    # keepdim or not: the two values need not broadcast, and the other is never computed.
    assert _value("where(c, x, unsqueeze(x, 0))", x=x, c=True).shape == (2, 2)
    assert _value("where(c, x, unsqueeze(x, 0))", x=x, c=False).shape == (1, 2, 2)
    assert _value("where(c, x, sum(x, 5))", x=x, c=True).tolist() == x
    with pytest.raises(EvaluationError, match="dimension 5 does not exist"):
        _value("where(c, x, sum(x, 5))", x=x, c=False)
    # A condition of several elements chooses element by element: both are computed.
    assert _value("where(x > 2, x, 0)", x=x).tolist() == [[0.0, 0.0], [3.0, 4.0]]
    with pytest.raises(EvaluationError, match="dimension 5 does not exist"):
        _value("where(x > 2, x, sum(x, 5))", x=x)


def test_a_kept_reduction_around_the_inputs_dimension_is_taken_in_the_inputs_shape():
    import torch

    from trainer.formula_torch import as_gradient

    weight = torch.zeros(3, dtype=torch.float64)
    kept = torch.arange(3.0, dtype=torch.float64).reshape(1, 3, 1, 1)
    assert as_gradient(kept, weight).tolist() == [0.0, 1.0, 2.0]
    # A transpose keeps its shape: the verdict names it.
    square = torch.zeros(2, 3, dtype=torch.float64)
    assert as_gradient(torch.zeros(3, 2, dtype=torch.float64), square).shape == (3, 2)
