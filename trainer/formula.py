"""The whiteboard's formula language: a tokenizer and a Pratt parser into nodes of its own.

A gradient typed at ``trainer derive`` (``g * y * (1 - y)``) is text from outside.
It becomes a tree of the node types below, and only those: numbers, names,
the operators ``+ - * / @ ^`` (``**`` too), comparisons, the transpose (``ᵀ`` or
``.T``, the one thing that may follow a dot), calls of the functions of
:data:`FUNCTIONS` by name, and a parenthesised list of dimensions (or ``all_but(…)``,
the dimensions it leaves out), only as a reduction's. There is no
attribute access, no subscript, no string, no keyword: a character or a word
that is not part of the language stops the parser with its position. Nothing
here hands text to Python's own evaluation, and the evaluator
(:mod:`trainer.formula_torch`) looks names up in tables of its own; a test scans
the modules that read or evaluate a formula for any way to run text.

No torch here: a spec's formulas are parsed when it loads, and a formula that is
not understood is answered before torch is imported.
"""

from __future__ import annotations

import difflib
import keyword
import re
from collections.abc import Collection, Iterator
from dataclasses import dataclass, replace

MAX_LENGTH = 400  # characters of one formula
MAX_DEPTH = 40  # nested operators, calls and parentheses

# Names every formula may use, besides an exercise's own.
CONSTANTS = {"pi": 3.141592653589793}


class FormulaError(Exception):
    """Text that is not a formula, or one whose names do not fit: where, and why.

    ``start`` and ``end`` are character offsets into the text (``end`` exclusive).
    """

    def __init__(self, message: str, start: int, end: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.start = start
        self.end = max(end if end is not None else start + 1, start + 1)


class EvaluationError(Exception):
    """A formula understood but not computable on some inputs (shapes that do not fit):
    a wrong answer, shown with the part of the formula that failed."""

    def __init__(self, message: str, start: int, end: int) -> None:
        super().__init__(message)
        self.message = message
        self.start = start
        self.end = max(end, start + 1)


# The nodes. Each keeps the span of text it was read from, for a caret under it.


@dataclass(frozen=True)
class Number:
    value: float
    integer: bool  # written without a point or exponent: usable as a dimension
    start: int
    end: int


@dataclass(frozen=True)
class Name:
    name: str
    start: int
    end: int


@dataclass(frozen=True)
class Unary:
    op: str  # "-"
    operand: Node
    start: int
    end: int


@dataclass(frozen=True)
class Binary:
    op: str  # "+", "-", "*", "/", "@", "^"
    left: Node
    right: Node
    start: int
    end: int


@dataclass(frozen=True)
class Compare:
    op: str  # "<", "<=", ">", ">=", "==", "!="
    left: Node
    right: Node
    start: int
    end: int


@dataclass(frozen=True)
class Transpose:
    operand: Node
    start: int
    end: int


@dataclass(frozen=True)
class Call:
    function: str
    args: tuple[Node, ...]
    start: int
    end: int


@dataclass(frozen=True)
class Dims:
    """``(0, 1)``: several dimensions, only as the dimensions of a reduction."""

    items: tuple[Node, ...]
    start: int
    end: int


Node = Number | Name | Unary | Binary | Compare | Transpose | Call | Dims


@dataclass(frozen=True)
class Function:
    """A function a formula may call: the kinds of its arguments, in order. ``value``
    is any formula, ``dims`` one dimension or a list of them, ``name`` the name of a
    tensor; the last ``optional`` arguments may be left out."""

    arguments: tuple[str, ...]
    means: str
    optional: int = 0


_UNARY = ("value",)
FUNCTIONS: dict[str, Function] = {
    "exp": Function(_UNARY, "e to the power"),
    "log": Function(_UNARY, "natural logarithm"),
    "sqrt": Function(_UNARY, "square root"),
    "abs": Function(_UNARY, "absolute value"),
    "sign": Function(_UNARY, "-1, 0 or 1"),
    "tanh": Function(_UNARY, "hyperbolic tangent"),
    "sigmoid": Function(_UNARY, "1 / (1 + exp(-x)), also σ"),
    "softplus": Function(_UNARY, "log(1 + exp(x))"),
    "relu": Function(_UNARY, "max(x, 0)"),
    "erf": Function(_UNARY, "the error function"),
    "Phi": Function(_UNARY, "the standard normal CDF"),
    "phi": Function(_UNARY, "the standard normal density"),
    "sin": Function(_UNARY, "sine"),
    "cos": Function(_UNARY, "cosine"),
    "log1p": Function(_UNARY, "log(1 + x)"),
    "expm1": Function(_UNARY, "exp(x) - 1"),
    "max": Function(("value", "value"), "the larger, element by element"),
    "min": Function(("value", "value"), "the smaller, element by element"),
    "where": Function(("value", "value", "value"), "where(condition, if true, if false)"),
    "sum": Function(("value", "dims"), "sum over dims, kept as size 1 (all when left out)", 1),
    "mean": Function(("value", "dims"), "mean over dims, kept as size 1", 1),
    "var": Function(("value", "dims"), "variance (divided by n) over dims, kept as size 1", 1),
    "amax": Function(("value", "dims"), "largest value over dims, kept as size 1", 1),
    "logsumexp": Function(("value", "dims"), "log(sum(exp(e), dims)), kept as size 1"),
    "softmax": Function(("value", "dims"), "softmax along one dimension"),
    "log_softmax": Function(("value", "dims"), "log of softmax along one dimension"),
    "sum_to": Function(("value", "name"), "summed down to the shape of a named input"),
    "unsqueeze": Function(("value", "dims"), "a new dimension of size 1 at dim"),
    "numel": Function(_UNARY, "the number of elements"),
    "size": Function(("value", "dims"), "the length of dimension dim"),
    "onehot": Function(
        ("value", "value"), "onehot(t, C): a new last dimension of length C, 1 at position t"
    ),
    "tril": Function(_UNARY, "the lower triangle of the last two dimensions (0 above)"),
    "reshape": Function(("value", "value"), "reshape(e, like): e's elements in like's shape"),
}
# The functions whose dimensions may be a list, such as (0, 1), or all_but(…).
SEVERAL_DIMS = ("sum", "mean", "var", "amax", "logsumexp")
# Dimensions named by those they leave out: sum(e, all_but(1)) sums over every dimension
# of e but 1, whatever e's rank (a batch norm's statistics of (N, C) or (N, C, H, W)).
ALL_BUT = "all_but"

# Characters of mathematics typed as they are written, and what they stand for.
_SYMBOLS = {
    "·": "*",
    "×": "*",
    "−": "-",
    "ᵀ": "T",
    "²": "²",
    "³": "³",
    "≤": "<=",
    "≥": ">=",
    "≠": "!=",
    "σ": "sigmoid",
    "π": "pi",
}
_OPERATORS = ("**", "<=", ">=", "==", "!=", "+", "-", "*", "/", "@", "^", "<", ">", "(", ")", ",")
_NUMBER = re.compile(r"(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# "dL/dx = …", "dx = …", "grad_x = …": the left-hand side a learner may type first.
_LEFT_SIDE = re.compile(r"\s*(dL/d\w+|∂L/∂\w+|d\w+|grad_\w+)\s*=(?!=)")
# What a character that is not part of the language usually means.
_FOREIGN = {
    "[": "indexing is not part of a formula",
    "]": "indexing is not part of a formula",
    "'": "text in quotes is not part of a formula",
    '"': "text in quotes is not part of a formula",
    "=": "a formula has no = (type only the right-hand side; == compares)",
    ":": "`:` is not part of a formula",
    ";": "one formula at a time: `;` is not part of it",
    "{": "braces are not part of a formula",
    "}": "braces are not part of a formula",
    "!": "`!` is only part of != (not equal)",
}


@dataclass(frozen=True)
class Token:
    kind: str  # "number", "name", "op" or "end"
    text: str  # an op or a name as the parser knows it (ᵀ is "T", σ is "sigmoid")
    start: int
    end: int


def tokens(text: str) -> Iterator[Token]:
    """The tokens of ``text``, then one ``end`` token; a FormulaError at the first
    character that is not part of the language."""
    position = 0
    left = _LEFT_SIDE.match(text)
    if left is not None:
        position = left.end()
    while position < len(text):
        char = text[position]
        if char.isspace():
            position += 1
            continue
        number = _NUMBER.match(text, position)
        if number is not None and (char.isdigit() or char == "."):
            yield Token("number", number.group(), position, number.end())
            position = number.end()
            continue
        if char == ".":
            after = _NAME.match(text, position + 1)
            if after is not None and after.group() == "T":
                yield Token("op", "T", position, after.end())
                position = after.end()
                continue
            raise FormulaError(
                "only .T (the transpose) may follow a dot: attributes are not part of a formula",
                position,
                after.end() if after is not None else None,
            )
        name = _NAME.match(text, position)
        if name is not None:
            word = name.group()
            if "__" in word:
                raise FormulaError(
                    f"`{word}` is not a name of a formula (no name has a double underscore)",
                    position,
                    name.end(),
                )
            if keyword.iskeyword(word):
                raise FormulaError(
                    f"`{word}` is a word of Python, not part of a formula", position, name.end()
                )
            yield Token("name", word, position, name.end())
            position = name.end()
            continue
        if char in _SYMBOLS:
            meaning = _SYMBOLS[char]
            kind = "name" if meaning.isalpha() and len(meaning) > 1 else "op"
            yield Token(kind, meaning, position, position + 1)
            position += 1
            continue
        operator = next((op for op in _OPERATORS if text.startswith(op, position)), None)
        if operator is not None:
            yield Token(
                "op", "^" if operator == "**" else operator, position, position + len(operator)
            )
            position += len(operator)
            continue
        raise FormulaError(_FOREIGN.get(char, f"`{char}` is not part of a formula"), position)
    yield Token("end", "", len(text), len(text))


# Binding powers (left, right) of the infix operators: right > left is left-associative.
_INFIX = {
    "<": (2, 3),
    "<=": (2, 3),
    ">": (2, 3),
    ">=": (2, 3),
    "==": (2, 3),
    "!=": (2, 3),
    "+": (4, 5),
    "-": (4, 5),
    "*": (6, 7),
    "/": (6, 7),
    "@": (6, 7),
    "^": (11, 10),  # right-associative: 2^3^2 is 2^9
}
_COMPARISONS = ("<", "<=", ">", ">=", "==", "!=")
_PREFIX = 8  # -x^2 is -(x^2); -x * y is (-x) * y
_POSTFIX = 13  # ᵀ, ², ³


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = list(tokens(text))
        self.index = 0
        self.depth = 0

    def peek(self) -> Token:
        return self.tokens[self.index]

    def advance(self) -> Token:
        token = self.tokens[self.index]
        self.index += 1
        return token

    def expect(self, text: str, what: str) -> Token:
        token = self.peek()
        if token.kind != "op" or token.text != text:
            raise FormulaError(f"expected {what}, found {_shown(token)}", token.start, token.end)
        return self.advance()

    def expression(self, min_power: int = 0) -> Node:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            token = self.peek()
            raise FormulaError(f"nested more than {MAX_DEPTH} deep", token.start, token.end)
        left = self.prefix()
        while True:
            token = self.peek()
            if token.kind != "op":
                break
            if token.text in ("T", "²", "³"):
                if min_power > _POSTFIX:
                    break
                self.advance()
                if token.text == "T":
                    left = Transpose(left, left.start, token.end)
                else:
                    power = Number(2.0 if token.text == "²" else 3.0, True, token.start, token.end)
                    left = Binary("^", left, power, left.start, token.end)
                continue
            powers = _INFIX.get(token.text)
            if powers is None or powers[0] < min_power:
                break
            if token.text in _COMPARISONS and isinstance(left, Compare):
                raise FormulaError(
                    "one comparison at a time (a < b < c is not a formula)", token.start, token.end
                )
            self.advance()
            right = self.expression(powers[1])
            if token.text in _COMPARISONS:
                left = Compare(token.text, left, right, left.start, right.end)
            else:
                left = Binary(token.text, left, right, left.start, right.end)
        self.depth -= 1
        return left

    def prefix(self) -> Node:
        token = self.advance()
        if token.kind == "number":
            integer = token.text.isdigit()
            return Number(float(token.text), integer, token.start, token.end)
        if token.kind == "name":
            following = self.peek()
            if following.kind == "op" and following.text == "(":
                return self.call(token)
            return Name(token.text, token.start, token.end)
        if token.kind == "op" and token.text in ("-", "+"):
            operand = self.expression(_PREFIX)
            if token.text == "+":
                return operand
            return Unary("-", operand, token.start, operand.end)
        if token.kind == "op" and token.text == "(":
            return self.group(token)
        if token.kind == "end":
            raise FormulaError(
                "the formula ends too soon: expected a number, a name or (", token.start
            )
        raise FormulaError(
            f"expected a number, a name or ( here, found {_shown(token)}", token.start, token.end
        )

    def call(self, name: Token) -> Node:
        self.advance()  # (
        args: list[Node] = []
        if not (self.peek().kind == "op" and self.peek().text == ")"):
            args.append(self.expression())
            while self.peek().kind == "op" and self.peek().text == ",":
                self.advance()
                args.append(self.expression())
        close = self.expect(")", f"`,` or `)` to close {name.text}(")
        return Call(name.text, tuple(args), name.start, close.end)

    def group(self, opening: Token) -> Node:
        inner = self.expression()
        if self.peek().kind == "op" and self.peek().text == ",":
            items = [inner]
            while self.peek().kind == "op" and self.peek().text == ",":
                self.advance()
                items.append(self.expression())
            close = self.expect(")", "`,` or `)`")
            return Dims(tuple(items), opening.start, close.end)
        close = self.expect(")", "`)` to close the `(`")
        return replace(inner, start=opening.start, end=close.end)


def _shown(token: Token) -> str:
    if token.kind == "end":
        return "the end of the formula"
    return f"`{token.text}`"


def parse(text: str) -> Node:
    """The tree of ``text``; a FormulaError with the position where it stopped."""
    if len(text) > MAX_LENGTH:
        raise FormulaError(
            f"a formula is at most {MAX_LENGTH} characters (this one has {len(text)})", MAX_LENGTH
        )
    parser = _Parser(text)
    if parser.peek().kind == "end":
        raise FormulaError("the formula is empty", 0)
    node = parser.expression()
    token = parser.peek()
    if token.kind != "end":
        before = parser.tokens[parser.index - 1]
        if before.kind == "name" and before.text in FUNCTIONS and token.kind != "op":
            message = f"`{before.text}` is a function: write {before.text}(…)"
            token = before
        elif token.kind in ("name", "number") or token.text == "(":
            message = f"expected an operator before {_shown(token)} (write * between factors)"
        elif token.text == ")":
            message = "this `)` closes nothing"
        else:
            message = f"expected an operator or the end of the formula, found {_shown(token)}"
        raise FormulaError(message, token.start, token.end)
    return node


def children(node: Node) -> tuple[Node, ...]:
    if isinstance(node, Unary | Transpose):
        return (node.operand,)
    if isinstance(node, Binary | Compare):
        return (node.left, node.right)
    if isinstance(node, Call):
        return node.args
    if isinstance(node, Dims):
        return node.items
    return ()


def check_names(node: Node, names: Collection[str]) -> None:
    """Every name of ``node`` is one of ``names`` (or a constant), every call is of a
    function of :data:`FUNCTIONS` with the arguments it takes; a FormulaError at the
    first that is not."""
    known = [*names, *CONSTANTS]
    if isinstance(node, Name):
        if node.name in known:
            return
        if node.name in FUNCTIONS:
            raise FormulaError(
                f"`{node.name}` is a function: write {node.name}(…)", node.start, node.end
            )
        close = difflib.get_close_matches(node.name, known, n=1)
        hint = f"; did you mean `{close[0]}`?" if close else f" (the names: {', '.join(known)})"
        raise FormulaError(f"unknown name `{node.name}`{hint}", node.start, node.end)
    if isinstance(node, Dims):
        raise FormulaError(
            "a list like (0, 1) only gives the dimensions of a sum, mean, var, amax or logsumexp",
            node.start,
            node.end,
        )
    if isinstance(node, Call) and node.function == ALL_BUT:
        raise FormulaError(
            f"{ALL_BUT}(…) only gives the dimensions of a sum, mean, var, amax or logsumexp, "
            f"as in sum(e, {ALL_BUT}(1))",
            node.start,
            node.end,
        )
    if isinstance(node, Call):
        _check_call(node, names)
        return
    for child in children(node):
        check_names(child, names)


def _check_call(node: Call, names: Collection[str]) -> None:
    function = FUNCTIONS.get(node.function)
    end = node.start + len(node.function)
    if function is None:
        if node.function in names:
            raise FormulaError(
                f"`{node.function}` is not a function: write {node.function} * (…)",
                node.start,
                end,
            )
        close = difflib.get_close_matches(node.function, list(FUNCTIONS), n=1)
        hint = f"; did you mean `{close[0]}`?" if close else ""
        raise FormulaError(f"unknown function `{node.function}`{hint}", node.start, end)
    most = len(function.arguments)
    least = most - function.optional
    if not least <= len(node.args) <= most:
        wanted = str(most) if least == most else f"{least} or {most}"
        raise FormulaError(
            f"{node.function} takes {wanted} argument{'s' * (most != 1)} "
            f"({function.means}), not {len(node.args)}",
            node.start,
            node.end,
        )
    for kind, argument in zip(function.arguments, node.args, strict=False):
        if kind == "dims":
            _check_dims(argument, names, several=node.function in SEVERAL_DIMS)
        elif kind == "name":
            if not isinstance(argument, Name) or argument.name not in names:
                raise FormulaError(
                    f"the second argument of {node.function} is the name of an input",
                    argument.start,
                    argument.end,
                )
        else:
            check_names(argument, names)


def _check_dims(node: Node, names: Collection[str], several: bool) -> None:
    """A dimension: a whole number, maybe negative, or a name (an int parameter); a
    reduction also takes a list of them."""
    if isinstance(node, Dims) and several:
        for item in node.items:
            _check_dims(item, names, several=False)
        return
    if isinstance(node, Call) and node.function == ALL_BUT and several:
        if len(node.args) != 1:
            raise FormulaError(
                f"{ALL_BUT} takes 1 argument (a dimension or a list of them), not {len(node.args)}",
                node.start,
                node.end,
            )
        (left_out,) = node.args
        if isinstance(left_out, Dims):
            for item in left_out.items:
                _check_dims(item, names, several=False)
        else:
            _check_dims(left_out, names, several=False)
        return
    inner = node.operand if isinstance(node, Unary) else node
    if isinstance(inner, Number) and inner.integer:
        return
    if isinstance(inner, Name) and inner.name in names:
        return
    raise FormulaError(
        "a dimension is a whole number such as -1, or the name of one"
        + (f", or a list such as (0, 1), or {ALL_BUT}(…)" if several else ""),
        node.start,
        node.end,
    )


def understand(text: str, names: Collection[str]) -> Node:
    """``text`` parsed and its names checked against ``names``: the formula a learner
    or a spec wrote, or a FormulaError saying where it stops making sense."""
    node = parse(text)
    check_names(node, names)
    return node


def names_in(node: Node) -> set[str]:
    """The names a formula uses (not the functions it calls)."""
    found = {node.name} if isinstance(node, Name) else set()
    for child in children(node):
        found |= names_in(child)
    return found


def output_names(outputs: int, taken: Collection[str] = ()) -> tuple[tuple[str, str], ...]:
    """The names of the outputs and of their upstream gradients: ``y`` and ``g`` for one
    output, ``y1, g1, y2, g2…`` for several; ``out`` (``out1…``) for the outputs when an
    input is already called ``y`` (a dot product of ``x`` and ``y``), ``grad_out`` for the
    gradients when one is called ``g``."""
    output = "out" if "y" in taken else "y"
    gradient = "grad_out" if "g" in taken else "g"
    if outputs == 1:
        return ((output, gradient),)
    return tuple((f"{output}{i}", f"{gradient}{i}") for i in range(1, outputs + 1))
