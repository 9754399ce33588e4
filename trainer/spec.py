"""Exercise specs: YAML files loaded into typed, validated objects.

Every problem is reported as ``<file>: <field path>: <what is wrong>`` so that an
author can fix it without reading a traceback. The format is documented in
``docs/spec-format.md``; keep the two in step.
"""

from __future__ import annotations

import ast
import difflib
import functools
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

import yaml

from trainer.errors import SpecError, SpecFieldError, SpecProblems
from trainer.formula import CONSTANTS, FUNCTIONS, FormulaError, output_names, understand
from trainer.vocabulary import FUNCTION_API, MISTAKE_IDS, STAGE_BY_ID, STAGE_IDS, stages_for

FORMAT_VERSION = 1
# What an answer may be (see trainer.checking.learner.answers).
ANSWER_FORMS = ("function", "custom_op")
DIFFICULTIES = ("easy", "medium", "hard", "expert")
# The topics the catalogue is grouped by (`trainer list`, `trainer next --track`), in
# the order they are shown, with their titles.
TRACKS = {
    "activations": "Activations",
    "linalg_indexing": "Linear algebra and indexing",
    "losses": "Losses",
    "normalisation": "Normalisation",
    "conv_pool": "Convolution and pooling",
    "attention": "Attention",
    "networks": "Whole networks",
    "function_api": "The Function API",
}
OTHER_TRACK = "Other exercises"  # the heading of exercises that name no track
DTYPE_NAMES = ("float32", "float64")
SCALAR_KINDS = ("float", "int", "bool")
ID_PATTERN = re.compile(r"^[a-z][a-z0-9_]*$")
IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

ScalarKind = Literal["float", "int", "bool"]
ScalarValue = float | int | bool
CaseValue = tuple[int, ...] | ScalarValue


@dataclass
class TensorParam:
    """A tensor argument of ``forward``, filled with uniform values in [low, high]."""

    name: str
    low: float
    high: float
    requires_grad: bool = True
    # Points where the function has a kink, as expressions over the scalar
    # arguments (e.g. "clip_val"). Random values are kept away from them.
    kinks: tuple[str, ...] = ()
    # "float" (follows the run's dtype) or "int" (int64 in [low, high), never
    # requires grad: class labels, indices).
    dtype: str = "float"
    # Float tensors: the whole range the op is meant for. The stability stage
    # draws values across it on a log scale (large magnitudes included).
    domain: tuple[float, float] | None = None
    # Int tensors: `high` as an expression over the case (e.g. "logits.shape[-1]"),
    # so that a class count or a table size follows the shapes.
    high_expression: str | None = None

    @property
    def is_float(self) -> bool:
        return self.dtype == "float"


@dataclass
class ScalarParam:
    """A non-tensor argument of ``forward`` (a Python float, int or bool)."""

    name: str
    kind: ScalarKind


Param = TensorParam | ScalarParam


@dataclass
class Case:
    """One concrete call: a shape for every tensor argument, a value for every scalar one."""

    values: Mapping[str, CaseValue]

    def describe(self) -> str:
        parts = []
        for name, value in self.values.items():
            if isinstance(value, tuple):
                parts.append(
                    f"{name}: ({', '.join(map(str, value))}{',' if len(value) == 1 else ''})"
                )
            else:
                parts.append(f"{name}={value}")
        return ", ".join(parts)


@dataclass
class QuizQuestion:
    question: str
    choices: tuple[str, ...]
    answer: int  # 1-based, the number a learner types
    explanation: str


@dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol: float


@dataclass(frozen=True)
class Tolerances:
    float32: Tolerance = Tolerance(rtol=1e-5, atol=1e-6)
    float64: Tolerance = Tolerance(rtol=1e-7, atol=1e-10)
    gradcheck_eps: float = 1e-6
    gradcheck_atol: float = 1e-5
    gradcheck_rtol: float = 1e-3


@dataclass
class WrongVariant:
    """A known-wrong solution that the checker must reject at ``fails_at``."""

    file: str  # relative to solutions/wrong/<exercise id>/
    fails_at: str
    why: str
    mistake: str | None = None  # the diagnosis the checker must name, when declared
    # A follow-up's id: the variant passes the base check and fails at ``fails_at``
    # once that follow-up is active.
    follow_up: str | None = None
    # Where the report must say the first wrong gradient is, walking backward (a layer of
    # ``intermediates`` or an input that requires grad): validation holds the checker to it.
    first_wrong: str | None = None


# What a follow-up's constraint may be (see docs/spec-format.md, "Follow-ups").
FOLLOW_UP_KINDS = ("saved", "working_memory", "speed", "double_backward", "domain")
# What a saved-memory budget counts: elements (a bool counts as a float), or bytes (a
# bool mask is a quarter of the float32 tensor it marks).
SAVED_UNITS = ("elements", "bytes")


@dataclass
class FollowUp:
    """The interviewer's question after a pass, and what the checker holds the answer to."""

    id: str
    question: str  # in words, with no answer in it
    hints: tuple[str, ...]
    check: str  # one of FOLLOW_UP_KINDS
    # saved: what is kept for backward, in ``unit`` (elements or bytes), at most
    # ``at_most`` times the same count of ``of`` (an input's name, ``output`` or
    # ``largest``); working_memory: the peak allocated during backward, at most
    # ``at_most`` times the largest input or output; speed: backward's time, at most
    # ``at_most`` times the reference's.
    at_most: float = 0.0
    of: str = "largest"
    unit: str = "elements"  # check: saved, one of SAVED_UNITS
    case: Case | None = None  # the call measured; by default the largest case
    domain: Mapping[str, tuple[float, float]] = field(default_factory=dict)  # check: domain


@dataclass
class DeclaredMistake:
    """A classic mistake of this exercise, known by the wrong gradient it gives."""

    words: str  # what the learner reads when the checker names it
    gradient: Mapping[str, str]  # per input: the wrong gradient, as an expression


@dataclass
class StabilityProbe:
    """Extreme inputs where the reference is finite: the learner's results must be too."""

    dtype: str
    values: Mapping[str, Any]  # nested lists of numbers for tensors, a value for scalars


@dataclass(frozen=True)
class Derivation:
    """``derive:``, the gradient on the whiteboard (``trainer derive``): formulas in the
    language of :mod:`trainer.formula`, over the names of :attr:`scope`."""

    # The inputs asked, in the order of the parameters, each with its right gradient.
    answers: Mapping[str, str]
    # Further names a formula may use, each defined by a formula over those before it.
    names: Mapping[str, str] = field(default_factory=dict)
    # Classic mistakes written as formulas: mistake -> input -> formula. Validation
    # holds each to being rejected with that mistake named.
    mistakes: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # Every name a formula may use, in the order they are introduced to the learner.
    scope: tuple[str, ...] = ()


@dataclass(frozen=True)
class Layer:
    """One boundary between layers of the chain ``intermediates:`` declares."""

    name: str  # a Python name, used by the chain's expressions
    words: str  # how the report says it: "the batch-norm input"
    value: str  # forward's value there, over the parameters and the next layer's name


@dataclass(frozen=True)
class Chain:
    """``intermediates:``, forward written as a chain of named values, so that a wrong
    gradient can be traced to the first layer where it goes wrong (``trusted.chain``)."""

    output: str  # forward's output(s), an expression over the first layer's name
    layers: tuple[Layer, ...]  # in backward order: the first is nearest the output
    # Each input that requires grad -> the layer whose gradient gives its own: 1 for the
    # first layer (counted from 1), 0 for an input the output expression uses.
    feeds: Mapping[str, int] = field(default_factory=dict)

    def order(self) -> list[tuple[str, int]]:
        """Everything backward computes, in its order: (a layer's name, its index from
        1) for a layer, (an input's name, 0) for an input, after the layer giving it."""
        found: list[tuple[str, int]] = [(n, 0) for n, at in self.feeds.items() if at == 0]
        for index, layer in enumerate(self.layers, 1):
            found.append((layer.name, index))
            found += [(n, 0) for n, at in self.feeds.items() if at == index]
        return found


@dataclass
class Exercise:
    format_version: int
    id: str
    title: str
    difficulty: str
    class_name: str
    statement: str
    parameters: tuple[Param, ...]
    outputs: int
    reference: str
    cases: tuple[Case, ...]
    stub: str
    hints: tuple[str, ...]
    quiz: tuple[QuizQuestion, ...]
    tolerances: Tolerances
    wrong_variants: tuple[WrongVariant, ...] = ()
    notes: str = ""
    # The worked derivation, in math notation and preformatted: shown after the first
    # pass and by `trainer explain` (trainer.explain).
    derivation: str = ""
    order: int = 100  # position among exercises of the same difficulty
    track: str | None = None  # one of TRACKS; None lists it under OTHER_TRACK
    # The ids of the exercises to do before this one (`trainer list` puts them first).
    requires: tuple[str, ...] = ()
    stability: tuple[StabilityProbe, ...] = ()
    double_backward: bool = False
    # The gradient to compare with, per input, where autograd of the reference
    # is not the target (a straight-through estimator). Expressions over the
    # parameters and grad_output (grad_outputs for several outputs).
    expected_gradient: Mapping[str, str] = field(default_factory=dict)
    gradcheck: bool = True  # false where finite differences do not apply
    # Mistakes of this exercise the diagnosis recognises by their wrong gradient.
    mistakes: Mapping[str, DeclaredMistake] = field(default_factory=dict)
    # Parts of the Function API the exercise teaches; each adds its stage.
    function_api: tuple[str, ...] = ()
    # The form of the answer: a Function class ("function"), or an op made with
    # torch.library.custom_op with its gradient registered ("custom_op"); class_name is
    # then the op's name in the file.
    form: str = "function"
    # A grade's points per stage where they differ from the stage's default weight.
    weights: Mapping[str, int] = field(default_factory=dict)
    # The gradient as a formula, asked before the code (`trainer derive`).
    derive: Derivation | None = None
    # The interviewer's questions after a pass, and the one the learner took up.
    follow_ups: tuple[FollowUp, ...] = ()
    active_follow_up: str | None = None
    # Forward as a chain of named layers, for the first wrong gradient walking backward.
    intermediates: Chain | None = None
    source: Path = field(default=Path("<memory>"), compare=False)
    # The mapping this was validated from: what travels with a check's job, so
    # the checker uses exactly the spec the CLI validated.
    data: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.parameters)

    @property
    def follow_up(self) -> FollowUp | None:
        """The active follow-up, which the check grades too."""
        return next((f for f in self.follow_ups if f.id == self.active_follow_up), None)

    def with_follow_up(self, follow_up_id: str | None) -> Exercise:
        """This exercise with ``follow_up_id`` active (None: none), validated again from
        its data, so that the checker reads the same spec: a ``double_backward`` follow-up
        claims second derivatives, a ``domain`` one widens the domains."""
        data = {k: v for k, v in self.data.items() if k != "active_follow_up"}
        chosen = next((f for f in self.follow_ups if f.id == follow_up_id), None)
        if chosen is not None:
            data["active_follow_up"] = chosen.id
            if chosen.check == "double_backward":
                data["double_backward"] = True
            for index, param in enumerate(data.get("parameters", [])):
                if isinstance(param, dict) and param.get("name") in chosen.domain:
                    data["parameters"] = list(data["parameters"])
                    data["parameters"][index] = {
                        **param,
                        "domain": list(chosen.domain[param["name"]]),
                    }
        return exercise_from_mapping(data, str(self.source), self.source)

    def stage_weights(self) -> dict[str, int]:
        """Each stage this exercise gets, in order, with its points in a grade."""
        return {
            stage.id: self.weights.get(stage.id, stage.weight)
            for stage in stages_for(self, self.double_backward)
        }


T = TypeVar("T")

_BLOCK_START = re.compile(r"([-*+] |\d+\. |#|>|\|)")


def reflow(text: str) -> str:
    """Prose from a spec with its hard line breaks taken out, for the reader to wrap at
    its own width: the lines of a paragraph, or of a list item, become one line.
    Blank lines, the start of a list item, a heading, a quote or a table row, lines
    indented as code (4 spaces or more) and fenced code keep their breaks."""
    lines: list[str] = []
    fenced = False
    for line in text.strip("\n").split("\n"):
        stripped = line.strip()
        if stripped.startswith("```"):
            fenced = not fenced
            lines.append(line)
            continue
        previous = lines[-1].strip() if lines else ""
        joins = (
            not fenced
            and stripped
            and previous
            and not previous.startswith(("```", "#", "|"))
            and not _BLOCK_START.match(stripped)
            and len(line) - len(line.lstrip()) < 4
        )
        if joins:
            lines[-1] = lines[-1].rstrip() + " " + stripped
        else:
            lines.append(line)
    return "\n".join(lines)


class _Node:
    """A value inside a spec together with where it came from, for error messages."""

    def __init__(self, value: object, file: str, path: str) -> None:
        self.value = value
        self.file = file
        self.path = path

    def fail(self, message: str) -> SpecError:
        where = f"{self.file}: {self.path}" if self.path else self.file
        return SpecFieldError(f"{where}: {message}")

    def child(self, key: str | int) -> _Node:
        if isinstance(key, int):
            path = f"{self.path}[{key}]"
        else:
            # A key as written when it is a plain name; else quoted (a key with a line
            # break must not break the one line its problem is reported on).
            shown = key if re.fullmatch(r"[\w-]+", key) else repr(key)
            path = f"{self.path}.{shown}" if self.path else shown
        container = self.value
        if isinstance(key, int):
            return _Node(cast(Sequence[object], container)[key], self.file, path)
        return _Node(cast(Mapping[str, object], container).get(key), self.file, path)

    def mapping(self, required: Sequence[str], optional: Sequence[str] = ()) -> _Node:
        """Check the keys: every problem at once, each once. An unknown key close to a
        known one is a typo: it is named with a did-you-mean, and the field it stands
        for is not also said to be missing."""
        if not isinstance(self.value, dict):
            raise self.fail(f"expected a mapping, got {_describe(self.value)}")
        for key in self.value:
            if not isinstance(key, str):
                raise self.fail(f"keys must be text, got {key!r}")
        known = [*required, *optional]
        problems: list[str] = []
        meant: set[str] = set()
        for key in sorted(set(self.value) - set(known)):
            close = difflib.get_close_matches(key, [k for k in known if k not in self.value], 1)
            if close:
                meant.add(close[0])
                problems.append(
                    self.child(key)
                    .fail(f"is not a known field; did you mean `{close[0]}`?")
                    .message
                )
            else:
                listed = ", ".join(sorted(known))
                problems.append(
                    self.child(key).fail(f"is not a known field (known: {listed})").message
                )
        missing = [
            self.child(key).fail("is required but missing").message
            for key in required
            if key not in self.value and key not in meant
        ]
        problems = missing + problems
        if len(problems) == 1:
            raise SpecFieldError(problems[0])
        if problems:
            raise SpecProblems(problems)
        return self

    def has(self, key: str) -> bool:
        return isinstance(self.value, dict) and key in self.value

    def items(self, min_items: int = 0) -> list[_Node]:
        if not isinstance(self.value, list):
            raise self.fail(f"expected a list, got {_describe(self.value)}")
        if len(self.value) < min_items:
            raise self.fail(f"needs at least {min_items} entries, has {len(self.value)}")
        return [self.child(i) for i in range(len(self.value))]

    def text(self, pattern: re.Pattern[str] | None = None, what: str = "") -> str:
        if not isinstance(self.value, str):
            raise self.fail(f"expected text, got {_describe(self.value)}")
        if not self.value.strip():
            raise self.fail("must not be empty")
        if pattern is not None and not pattern.match(self.value):
            raise self.fail(f"{self.value!r} is not {what}")
        return self.value

    def integer(self, minimum: int | None = None) -> int:
        if isinstance(self.value, bool) or not isinstance(self.value, int):
            raise self.fail(f"expected a whole number, got {_describe(self.value)}")
        if minimum is not None and self.value < minimum:
            raise self.fail(f"{self.value} is below the minimum {minimum}")
        return self.value

    def number(self, positive: bool = False) -> float:
        if isinstance(self.value, bool) or not isinstance(self.value, int | float):
            raise self.fail(f"expected a number, got {_describe(self.value)}")
        value = float(self.value)
        if not math.isfinite(value):
            raise self.fail(f"{self.value} is not a finite number")
        if positive and value <= 0:
            raise self.fail(f"{self.value} must be greater than 0")
        return value

    def boolean(self) -> bool:
        if not isinstance(self.value, bool):
            raise self.fail(f"expected true or false, got {_describe(self.value)}")
        return self.value

    def choice(self, options: Sequence[str]) -> str:
        value = self.text()
        if value not in options:
            raise self.fail(f"{value!r} is not one of: {', '.join(options)}")
        return value

    def optional(self, key: str, read: Callable[[_Node], T], default: T) -> T:
        return read(self.child(key)) if self.has(key) else default


def _describe(value: object) -> str:
    if value is None:
        return "nothing (null)"
    text = repr(value)
    if len(text) > 40:
        text = text[:37] + "..."
    return f"{type(value).__name__} {text}"


def _python_expression(node: _Node) -> str:
    source = node.text()
    try:
        compile(source, f"{node.file}: {node.path}", "eval")
    except SyntaxError as error:
        raise node.fail(f"is not a valid Python expression: {error.msg}") from None
    return source


def _python_module(node: _Node) -> str:
    source = node.text()
    try:
        compile(source, f"{node.file}: {node.path}", "exec")
    except SyntaxError as error:
        raise node.fail(f"line {error.lineno}: {error.msg}") from None
    return source


def _parameter(node: _Node) -> Param:
    node.mapping(["name", "type"], ["low", "high", "requires_grad", "kinks", "dtype", "domain"])
    name = node.child("name").text(IDENTIFIER, "a Python identifier")
    kind = node.child("type").choice(("tensor", *SCALAR_KINDS))
    if kind != "tensor":
        for key in ("low", "high", "requires_grad", "kinks", "dtype", "domain"):
            if node.has(key):
                raise node.child(key).fail(f"only applies to tensors, and {name} is a {kind}")
        return ScalarParam(name=name, kind=cast(ScalarKind, kind))
    dtype = node.optional("dtype", lambda n: n.choice(("float", "int")), "float")
    low = node.optional("low", _Node.number, -1.0)
    high_expression = None
    if dtype == "int" and node.has("high") and isinstance(node.child("high").value, str):
        high_expression = _python_expression(node.child("high"))
        high = low + 1.0
    else:
        high = node.optional("high", _Node.number, 1.0)
    if low >= high:
        raise node.child("high").fail(f"{high} must be greater than low ({low})")
    domain = None
    if node.has("domain"):
        if dtype == "int":
            raise node.child("domain").fail("only float tensors have a domain")
        bounds = node.child("domain").items(min_items=2)
        if len(bounds) != 2:
            raise node.child("domain").fail("must be [lowest, highest]")
        domain = (bounds[0].number(), bounds[1].number())
        if not domain[0] <= low < high <= domain[1]:
            raise node.child("domain").fail(
                f"[{domain[0]:g}, {domain[1]:g}] must contain [low, high] = [{low:g}, {high:g}]"
            )
    kinks = node.optional(
        "kinks",
        lambda n: tuple(_python_expression(k) for k in n.items()),
        cast(tuple[str, ...], ()),
    )
    requires_grad = node.optional("requires_grad", _Node.boolean, dtype == "float")
    if dtype == "int":
        if requires_grad:
            raise node.child("requires_grad").fail("an int tensor cannot require grad")
        if kinks:
            raise node.child("kinks").fail("only float tensors have kinks")
        for key in ("low", "high"):
            if key == "high" and high_expression is not None:
                continue
            if node.has(key) and not float(node.child(key).value).is_integer():  # type: ignore[arg-type]
                raise node.child(key).fail("must be a whole number for an int tensor")
    return TensorParam(
        name=name,
        low=low,
        high=high,
        requires_grad=requires_grad,
        kinks=kinks,
        dtype=dtype,
        domain=domain,
        high_expression=high_expression,
    )


def _case(node: _Node, params: Sequence[Param]) -> Case:
    node.mapping([p.name for p in params])
    values: dict[str, CaseValue] = {}
    for param in params:
        item = node.child(param.name)
        if isinstance(param, TensorParam):
            dims = item.items(min_items=0)
            shape = tuple(d.integer(minimum=1) for d in dims)
            if math.prod(shape) > 100_000:
                raise item.fail(
                    f"{math.prod(shape)} elements is too many for a check (at most 100000)"
                )
            values[param.name] = shape
        elif param.kind == "float":
            values[param.name] = item.number()
        elif param.kind == "int":
            values[param.name] = item.integer()
        else:
            values[param.name] = item.boolean()
    return Case(values=values)


def _question(node: _Node) -> QuizQuestion:
    node.mapping(["question", "choices", "answer", "explanation"])
    choices = tuple(c.text() for c in node.child("choices").items(min_items=2))
    answer_node = node.child("answer")
    answer = answer_node.integer()
    if not 1 <= answer <= len(choices):
        raise answer_node.fail(
            f"{answer} is out of range ({len(choices)} choices; answers count from 1)"
        )
    return QuizQuestion(
        question=node.child("question").text(),
        choices=choices,
        answer=answer,
        explanation=node.child("explanation").text(),
    )


def _tolerance(node: _Node, default: Tolerance) -> Tolerance:
    node.mapping([], ["rtol", "atol"])
    return Tolerance(
        rtol=node.optional("rtol", lambda n: n.number(positive=True), default.rtol),
        atol=node.optional("atol", lambda n: n.number(positive=True), default.atol),
    )


def _tolerances(node: _Node) -> Tolerances:
    defaults = Tolerances()
    node.mapping([], ["float32", "float64", "gradcheck"])
    gradcheck = node.child("gradcheck")
    if node.has("gradcheck"):
        gradcheck.mapping([], ["eps", "atol", "rtol"])

    def grad_number(key: str, default: float) -> float:
        return gradcheck.optional(key, lambda n: n.number(positive=True), default)

    return Tolerances(
        float32=node.optional(
            "float32", lambda n: _tolerance(n, defaults.float32), defaults.float32
        ),
        float64=node.optional(
            "float64", lambda n: _tolerance(n, defaults.float64), defaults.float64
        ),
        gradcheck_eps=grad_number("eps", defaults.gradcheck_eps),
        gradcheck_atol=grad_number("atol", defaults.gradcheck_atol),
        gradcheck_rtol=grad_number("rtol", defaults.gradcheck_rtol),
    )


def _wrong_variant(node: _Node, declared: Sequence[str]) -> WrongVariant:
    node.mapping(["file", "fails_at", "why"], ["mistake", "follow_up", "first_wrong"])
    file = node.child("file").text(re.compile(r"^[A-Za-z0-9_\-]+\.py$"), "a file name like name.py")
    return WrongVariant(
        file=file,
        fails_at=node.child("fails_at").choice(STAGE_IDS),
        why=node.child("why").text(),
        mistake=node.optional("mistake", lambda n: n.choice((*MISTAKE_IDS, *declared)), None),
        follow_up=node.optional("follow_up", lambda n: n.text(ID_PATTERN, "a follow-up id"), None),
        first_wrong=node.optional("first_wrong", lambda n: n.text(IDENTIFIER, "a name"), None),
    )


# The keys each kind of follow-up takes beyond id, question, hints and check.
_FOLLOW_UP_KEYS = {
    "saved": ("of", "unit", "case"),
    "working_memory": ("case",),
    "speed": ("case",),
    "double_backward": (),
    "domain": ("domain",),
}


def _follow_up(node: _Node, params: Sequence[Param]) -> FollowUp:
    kind = node.child("check").choice(FOLLOW_UP_KINDS) if node.has("check") else "saved"
    measured = kind in ("saved", "working_memory", "speed")
    optional = [k for k in _FOLLOW_UP_KEYS[kind] if k != "at_most"]
    node.mapping(["id", "question", "hints", "check", *(["at_most"] if measured else [])], optional)
    tensors = [p.name for p in params if isinstance(p, TensorParam)]
    hints = tuple(h.text() for h in node.child("hints").items(min_items=1))
    if len(hints) > 2:
        raise node.child("hints").fail("give one or two hints: the question is the lesson")
    at_most = node.child("at_most").number(positive=True) if measured else 0.0
    domain: dict[str, tuple[float, float]] = {}
    if kind == "domain":
        floats = [p for p in params if isinstance(p, TensorParam) and p.is_float]
        node.child("domain").mapping([], [p.name for p in floats])
        for param in floats:
            if not node.child("domain").has(param.name):
                continue
            item = node.child("domain").child(param.name)
            bounds = item.items(min_items=2)
            if len(bounds) != 2:
                raise item.fail("must be [lowest, highest]")
            low, high = bounds[0].number(), bounds[1].number()
            if not low <= param.low < param.high <= high:
                raise item.fail(f"[{low:g}, {high:g}] must contain [low, high] of {param.name}")
            domain[param.name] = (low, high)
        if not domain:
            raise node.child("domain").fail("name at least one float tensor and its domain")
    return FollowUp(
        id=node.child("id").text(ID_PATTERN, "an id (lower case letters, digits, _)"),
        question=node.child("question").text(),
        hints=hints,
        check=kind,
        at_most=at_most,
        of=node.optional("of", lambda n: n.choice(("largest", "output", *tensors)), "largest"),
        unit=node.optional("unit", lambda n: n.choice(SAVED_UNITS), "elements"),
        case=node.optional("case", lambda n: _case(n, params), None),
        domain=domain,
    )


def _follow_ups(node: _Node, params: Sequence[Param]) -> tuple[FollowUp, ...]:
    found = tuple(_follow_up(item, params) for item in node.items(min_items=1))
    for index, follow_up in enumerate(found):
        if follow_up.id in [f.id for f in found[:index]]:
            raise node.child(index).child("id").fail(f"{follow_up.id!r} is used twice")
    return found


def _declared_mistake(node: _Node, params: Sequence[Param]) -> DeclaredMistake:
    node.mapping(["words", "gradient"])
    return DeclaredMistake(
        words=node.child("words").text(),
        gradient=_expected_gradient(node.child("gradient"), params),
    )


def _mistakes(node: _Node, params: Sequence[Param]) -> dict[str, DeclaredMistake]:
    if not isinstance(node.value, dict) or not node.value:
        raise node.fail(f"expected a mapping of mistake names, got {_describe(node.value)}")
    declared = {}
    for name in node.value:
        child = node.child(str(name))
        if not isinstance(name, str) or not ID_PATTERN.match(name):
            raise child.fail("a mistake's name is lower case letters, digits and _")
        if name in MISTAKE_IDS:
            raise child.fail(f"{name!r} is one of the checker's own mistakes; pick another name")
        declared[name] = _declared_mistake(child, params)
    return declared


def _expected_gradient(node: _Node, params: Sequence[Param]) -> dict[str, str]:
    wanting = [p.name for p in params if isinstance(p, TensorParam) and p.requires_grad]
    node.mapping([], wanting)
    return {name: _python_expression(node.child(name)) for name in wanting if node.has(name)}


def _formula(node: _Node, scope: Sequence[str]) -> str:
    text = node.text()
    try:
        understand(text, scope)
    except FormulaError as error:
        raise node.fail(f"not understood at character {error.start + 1}: {error.message}") from None
    return text


def _derivation(
    node: _Node, params: Sequence[Param], outputs: int, mistakes: Sequence[str]
) -> Derivation:
    """``derive``: ``answers`` (required), ``names`` and ``mistakes``; every formula is
    understood over the names before it (numbers are `trainer validate`'s to check)."""
    node.mapping(["answers"], ["names", "mistakes"])
    # Every parameter by its name; an int tensor (class indices, a mask) as its values:
    # a formula has no indexing, but onehot(target, C) and comparisons read them.
    scope = [p.name for p in params]
    for y, g in output_names(outputs, scope):
        scope += [y, g]
    scope.append("grad_output")
    names: dict[str, str] = {}
    if node.has("names"):
        names_node = node.child("names")
        if not isinstance(names_node.value, dict) or not names_node.value:
            raise names_node.fail(
                f"expected a mapping of names to formulas, got {_describe(names_node.value)}"
            )
        for name in names_node.value:
            child = names_node.child(str(name))
            if not isinstance(name, str) or not IDENTIFIER.match(name) or "__" in name:
                raise child.fail("a name is letters, digits and _ (no double underscore)")
            if name in scope or name in FUNCTIONS or name in CONSTANTS:
                raise child.fail(f"{name!r} is already a name of formulas here; pick another")
            names[name] = _formula(child, scope)
            scope.append(name)
    wanting = [p.name for p in params if isinstance(p, TensorParam) and p.requires_grad]
    answers_node = node.child("answers")
    answers_node.mapping([], wanting)
    if not answers_node.value:
        raise answers_node.fail(f"needs the gradient of at least one of: {', '.join(wanting)}")
    answers = {
        name: _formula(answers_node.child(name), scope)
        for name in wanting
        if answers_node.has(name)
    }
    wrong: dict[str, dict[str, str]] = {}
    if node.has("mistakes"):
        mistakes_node = node.child("mistakes")
        if not isinstance(mistakes_node.value, dict) or not mistakes_node.value:
            raise mistakes_node.fail(
                f"expected a mapping of mistake names, got {_describe(mistakes_node.value)}"
            )
        for mistake in mistakes_node.value:
            child = mistakes_node.child(str(mistake))
            if mistake not in mistakes and mistake not in MISTAKE_IDS:
                raise child.fail(
                    f"{mistake!r} is neither a mistake of this spec (mistakes:) nor one the "
                    "checker names"
                )
            child.mapping([], list(answers))
            if not child.value:
                raise child.fail("needs a formula for at least one input asked")
            wrong[str(mistake)] = {
                name: _formula(child.child(name), scope) for name in answers if child.has(name)
            }
    return Derivation(answers=answers, names=names, mistakes=wrong, scope=tuple(scope))


def _names_in(source: str) -> set[str]:
    return {n.id for n in ast.walk(ast.parse(source, mode="eval")) if isinstance(n, ast.Name)}


def _intermediates(node: _Node, params: Sequence[Param]) -> Chain:
    """``intermediates``: ``output`` and ``layers`` (backward order), a chain: the output
    uses the first layer, each layer's value the next one, and no other layer."""
    node.mapping(["output", "layers"])
    output = _python_expression(node.child("output"))
    taken = {p.name for p in params} | {"torch", "F", "math", "ctx"}
    layers: list[Layer] = []
    for item in node.child("layers").items(min_items=1):
        item.mapping(["name", "words", "value"])
        name = item.child("name").text(IDENTIFIER, "a Python name")
        if name in taken:
            raise item.child("name").fail(f"{name!r} is a parameter's or a reserved name")
        taken.add(name)
        layers.append(
            Layer(name, item.child("words").text(), _python_expression(item.child("value")))
        )
    names = [layer.name for layer in layers]
    uses = [_names_in(output), *(_names_in(layer.value) for layer in layers)]
    for index, used in enumerate(uses):
        wanted = names[index : index + 1]
        where = node.child("output") if index == 0 else node.child("layers").child(index - 1)
        if sorted(used & set(names)) != wanted:
            layer = "no layer" if not wanted else f"the layer {wanted[0]!r} and no other"
            raise where.fail(f"must use {layer} (a chain: each expression uses the next layer)")
    feeds: dict[str, int] = {}
    for param in params:
        if isinstance(param, TensorParam) and param.requires_grad:
            using = [index for index, used in enumerate(uses) if param.name in used]
            if not using:
                raise node.fail(f"the chain never uses {param.name!r}, which requires grad")
            feeds[param.name] = max(using)
    return Chain(output=output, layers=tuple(layers), feeds=feeds)


def _check_first_wrong(exercise: Exercise, root: _Node) -> None:
    """A wrong variant's ``first_wrong`` names a layer of the chain or an input that
    requires grad, and fails at backward parity, the stage that says it."""
    chain = exercise.intermediates
    known = [n for n, _ in chain.order()] if chain is not None else []
    for index, variant in enumerate(exercise.wrong_variants):
        if variant.first_wrong is None:
            continue
        where = root.child("wrong_variants").child(index).child("first_wrong")
        if chain is None:
            raise where.fail("needs `intermediates:`, the chain it names a place of")
        if variant.first_wrong not in known:
            raise where.fail(f"{variant.first_wrong!r} is not one of: {', '.join(known)}")
        if variant.fails_at != "backward":
            raise where.fail("is said by backward parity: the variant must fail at backward")


def _weights(node: _Node) -> dict[str, int]:
    """``weights``: a stage id -> whole points >= 0; checked against the stages in ``_check_weights``."""
    if not isinstance(node.value, dict) or not node.value:
        raise node.fail(f"expected a mapping of stage ids to points, got {_describe(node.value)}")
    weights = {}
    for key in node.value:
        child = node.child(str(key))
        if key not in STAGE_BY_ID:
            raise child.fail(f"{key!r} is not a stage; the stages are: {', '.join(STAGE_IDS)}")
        weights[str(key)] = child.integer(minimum=0)
        if STAGE_BY_ID[key].with_stub and weights[str(key)]:
            raise child.fail(
                f"the stub passes {key!r} (its forward is given), so it is worth 0 points: "
                "a grade counts only what a learner writes. Weight the other stages"
            )
    return weights


def _check_weights(exercise: Exercise, node: _Node) -> None:
    """Every weighted stage is one this exercise gets, and some stage is worth points."""
    weights = exercise.stage_weights()
    for key in exercise.weights:
        if key not in weights:
            raise node.child(key).fail(
                f"this exercise has no {key!r} stage; its stages are: {', '.join(weights)}"
            )
    if sum(weights.values()) == 0:
        raise node.fail("every stage is worth 0 points; give at least one stage a weight")


def _function_api(node: _Node) -> tuple[str, ...]:
    features = tuple(item.choice(FUNCTION_API) for item in node.items(min_items=1))
    for index, feature in enumerate(features):
        if feature in features[:index]:
            raise node.child(index).fail(f"{feature!r} is listed twice")
    return features


def _numbers(node: _Node, depth: int = 0) -> Any:
    """A number or a nested list of numbers (a tensor's values)."""
    if isinstance(node.value, list):
        if depth > 8 or not node.value:
            raise node.fail("expected a number or a non-empty nested list of numbers")
        return [_numbers(item, depth + 1) for item in node.items()]
    if isinstance(node.value, str) and node.value in ("inf", "-inf", "nan"):
        raise node.fail("probe values must be finite numbers")
    return node.number()


def _stability_probe(node: _Node, params: Sequence[Param]) -> StabilityProbe:
    node.mapping(["dtype", "values"])
    dtype = node.child("dtype").choice(DTYPE_NAMES)
    values_node = node.child("values")
    values_node.mapping([p.name for p in params])
    values: dict[str, Any] = {}
    for param in params:
        item = values_node.child(param.name)
        if isinstance(param, TensorParam):
            values[param.name] = _numbers(item)
        elif param.kind == "float":
            values[param.name] = item.number()
        elif param.kind == "int":
            values[param.name] = item.integer()
        else:
            values[param.name] = item.boolean()
    return StabilityProbe(dtype=dtype, values=values)


_FIELDS_REQUIRED = (
    "format_version",
    "id",
    "title",
    "difficulty",
    "class_name",
    "statement",
    "parameters",
    "reference",
    "cases",
    "stub",
    "hints",
    "quiz",
    "tolerances",
)
_FIELDS_OPTIONAL = (
    "derivation",
    "derive",
    "active_follow_up",
    "double_backward",
    "expected_gradient",
    "follow_ups",
    "form",
    "function_api",
    "gradcheck",
    "intermediates",
    "mistakes",
    "notes",
    "order",
    "outputs",
    "requires",
    "stability",
    "track",
    "weights",
    "wrong_variants",
)


def _requires(node: _Node, exercise_id: str) -> tuple[str, ...]:
    """Prerequisite ids: each an id, none twice, never the exercise itself. Whether they
    exist, and that they form no cycle, is the catalogue's to check (``catalog.order``)."""
    ids: list[str] = []
    for item in node.items():
        required = item.text(ID_PATTERN, "an exercise id (lower case letters, digits, _)")
        if required == exercise_id:
            raise item.fail("an exercise cannot require itself")
        if required in ids:
            raise item.fail(f"{required!r} is listed twice")
        ids.append(required)
    return tuple(ids)


class _Collect:
    """Reads a spec's fields one by one, keeping every problem instead of stopping at the
    first, so that an author sees them all at once (each once)."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def __call__(self, read: Callable[[], T], default: T) -> T:
        try:
            return read()
        except SpecProblems as error:
            self.problems += error.problems
        except SpecFieldError as error:
            self.problems.append(error.message)
        return default

    def each(self, node: _Node, read: Callable[[_Node], T], min_items: int = 0) -> list[T] | None:
        """Every item of a list read on its own; None when the list or any item is wrong."""
        items = self(lambda: node.items(min_items=min_items), None)
        if items is None:
            return None
        before = len(self.problems)
        values = [self(functools.partial(read, item), None) for item in items]
        if len(self.problems) > before:
            return None
        return cast(list[T], values)


def _parameters(node: _Node, collect: _Collect) -> tuple[Param, ...] | None:
    read = collect.each(node, _parameter, min_items=1)
    if read is None:
        return None
    params = tuple(read)

    def names() -> None:
        names = [p.name for p in params]
        for index, name in enumerate(names):
            if name in names[:index]:
                raise node.child(index).child("name").fail(f"{name!r} is used twice")
            if name in ("ctx", "torch", "F", "math"):
                raise node.child(index).child("name").fail(f"{name!r} is a reserved name")
        if not any(isinstance(p, TensorParam) and p.requires_grad for p in params):
            raise node.fail("needs at least one tensor that requires grad")

    before = len(collect.problems)
    collect(names, None)
    return params if len(collect.problems) == before else None


def exercise_from_mapping(data: object, file: str, source: Path | None = None) -> Exercise:
    """Validate ``data`` (a parsed YAML document) into an :class:`Exercise`. Every
    problem is reported at once (:class:`SpecProblems`), each once; one alone is a
    :class:`SpecFieldError` as before. A field that depends on a broken one (the
    cases on the parameters) is not judged, so no problem is a knock-on of another."""
    root = _Node(data, file, "")
    if isinstance(data, dict) and "format_version" in data:
        version = root.child("format_version").integer(minimum=1)
        if version > FORMAT_VERSION:
            raise root.child("format_version").fail(
                f"{version} is newer than this trainer understands ({FORMAT_VERSION}); "
                "upgrade the trainer to use this exercise"
            )
    if not isinstance(data, dict):
        root.mapping(_FIELDS_REQUIRED, _FIELDS_OPTIONAL)  # raises: not a mapping
    collect = _Collect()
    collect(lambda: root.mapping(_FIELDS_REQUIRED, _FIELDS_OPTIONAL), None)

    def field(key: str, read: Callable[[_Node], Any], default: Any) -> Any:
        # A missing field was reported by mapping() (or is optional): nothing more to say.
        return collect(lambda: read(root.child(key)), default) if root.has(key) else default

    version = field("format_version", lambda n: n.integer(minimum=1), FORMAT_VERSION)
    params = _parameters(root.child("parameters"), collect) if root.has("parameters") else None
    hints = field("hints", lambda n: collect.each(n, _Node.text, min_items=3), None)
    mistakes = (
        field("mistakes", lambda n: _mistakes(n, params), cast(dict[str, DeclaredMistake], {}))
        if params is not None
        else {}
    )
    quiz = field("quiz", lambda n: collect.each(n, _question, min_items=3), None)
    exercise_id = field(
        "id", lambda n: n.text(ID_PATTERN, "an id (lower case letters, digits, _)"), ""
    )
    expected_name = Path(file).stem
    if source is not None and exercise_id and exercise_id != expected_name:
        collect.problems.append(
            root.child("id")
            .fail(f"{exercise_id!r} must match the file name ({expected_name!r})")
            .message
        )

    def with_params(read: Callable[[_Node], Any], default: Any) -> Callable[[_Node], Any]:
        # Fields read against the parameters are not judged when those are broken.
        return read if params is not None else (lambda _: default)

    outputs = field("outputs", lambda n: n.integer(minimum=1), 1)
    values: dict[str, Any] = {
        "title": field("title", _Node.text, ""),
        "difficulty": field("difficulty", lambda n: n.choice(DIFFICULTIES), "easy"),
        "class_name": field("class_name", lambda n: n.text(IDENTIFIER, "a Python class name"), ""),
        "statement": field("statement", _Node.text, ""),
        "outputs": outputs,
        "reference": field("reference", _python_expression, ""),
        "cases": field(
            "cases",
            with_params(lambda n: collect.each(n, lambda c: _case(c, params or ()), 1), None),
            None,
        ),
        "stub": field("stub", _python_module, ""),
        "tolerances": field("tolerances", _tolerances, Tolerances()),
        "wrong_variants": tuple(
            field(
                "wrong_variants",
                lambda n: collect.each(n, lambda v: _wrong_variant(v, list(mistakes))),
                None,
            )
            or ()
        ),
        "notes": field("notes", _Node.text, ""),
        "derivation": field("derivation", _Node.text, ""),
        "order": field("order", lambda n: n.integer(minimum=0), 100),
        "track": field("track", lambda n: n.choice(tuple(TRACKS)), None),
        "requires": field("requires", lambda n: _requires(n, exercise_id), ()),
        "stability": tuple(
            field(
                "stability",
                with_params(
                    lambda n: collect.each(n, lambda p: _stability_probe(p, params or ())), None
                ),
                None,
            )
            or ()
        ),
        "double_backward": field("double_backward", _Node.boolean, False),
        "expected_gradient": field(
            "expected_gradient",
            with_params(lambda n: _expected_gradient(n, params or ()), {}),
            {},
        ),
        "gradcheck": field("gradcheck", _Node.boolean, True),
        "function_api": field("function_api", _function_api, cast(tuple[str, ...], ())),
        "form": field("form", lambda n: n.choice(ANSWER_FORMS), "function"),
        "weights": field("weights", _weights, {}),
        "derive": field(
            "derive",
            with_params(
                lambda n: _derivation(n, params or (), outputs, list(mistakes)),
                None,
            ),
            None,
        ),
        "follow_ups": field(
            "follow_ups", with_params(lambda n: _follow_ups(n, params or ()), ()), ()
        ),
        "active_follow_up": field("active_follow_up", _Node.text, None),
        "intermediates": field(
            "intermediates", with_params(lambda n: _intermediates(n, params or ()), None), None
        ),
    }
    if collect.problems:
        problems = list(dict.fromkeys(collect.problems))
        if len(problems) == 1:
            raise SpecFieldError(problems[0])
        raise SpecProblems(problems)
    assert params is not None and hints is not None and quiz is not None
    exercise = Exercise(
        format_version=version,
        id=exercise_id,
        parameters=params,
        hints=tuple(hints),
        quiz=tuple(quiz),
        mistakes=mistakes,
        source=source or Path(file),
        data=cast(dict[str, Any], data),
        **{**values, "cases": tuple(values["cases"])},
    )
    _check_weights(exercise, root.child("weights"))
    _check_follow_ups(exercise, root)
    _check_first_wrong(exercise, root)
    if exercise.form != "function" and exercise.function_api:
        raise SpecFieldError(
            root.child("function_api")
            .fail(f"the Function API's parts teach a Function class; form {exercise.form} has none")
            .message
        )
    return exercise


def _check_follow_ups(exercise: Exercise, root: _Node) -> None:
    """The active follow-up is one of the exercise's; a wrong variant's follow-up too."""
    ids = [f.id for f in exercise.follow_ups]
    if exercise.active_follow_up is not None and exercise.active_follow_up not in ids:
        raise root.child("active_follow_up").fail(
            f"{exercise.active_follow_up!r} is not one of follow_ups ({', '.join(ids) or 'none'})"
        )
    for index, variant in enumerate(exercise.wrong_variants):
        if variant.follow_up is not None and variant.follow_up not in ids:
            raise (
                root.child("wrong_variants")
                .child(index)
                .child("follow_up")
                .fail(
                    f"{variant.follow_up!r} is not one of follow_ups ({', '.join(ids) or 'none'})"
                )
            )


def load_exercise(path: Path, display_name: str | None = None) -> Exercise:
    """Read and validate one spec file. Raises :class:`SpecError` on any problem."""
    name = display_name or str(path)
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise SpecError(f"{name}: cannot be read: {error.strerror}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise SpecError(f"{name}: is not UTF-8 text (byte {error.start})") from None
    try:
        data: Any = yaml.load(text, Loader=_SafeLoader)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise SpecError(f"{name}: invalid YAML: {where}{problem}") from None
    except RecursionError:
        raise SpecError(f"{name}: invalid YAML: nested too deeply") from None
    if data is None:
        raise SpecError(f"{name}: is empty")
    return exercise_from_mapping(data, name, source=path)


# The C loader is several times faster; both are safe loaders.
_SafeLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass
class SharedQuiz:
    """A quiz of its own, on concepts many exercises share (``quizzes/<id>.yaml``)."""

    id: str
    title: str
    quiz: tuple[QuizQuestion, ...]


def load_shared_quiz(path: Path, display_name: str | None = None) -> SharedQuiz:
    """Read and validate a shared quiz: ``format_version``, ``id``, ``title``, ``quiz``."""
    name = display_name or str(path)
    try:
        data: Any = yaml.load(path.read_text(encoding="utf-8-sig"), Loader=_SafeLoader)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
        raise SpecError(f"{name}: cannot be read as YAML: {error}") from None
    root = _Node(data, name, "")
    root.mapping(["format_version", "id", "title", "quiz"])
    version = root.child("format_version").integer(minimum=1)
    if version > FORMAT_VERSION:
        raise root.child("format_version").fail(
            f"{version} is newer than this trainer understands ({FORMAT_VERSION})"
        )
    quiz_id = root.child("id").text(ID_PATTERN, "an id (lower case letters, digits, _)")
    if quiz_id != path.stem:
        raise root.child("id").fail(f"{quiz_id!r} must match the file name ({path.stem!r})")
    return SharedQuiz(
        id=quiz_id,
        title=root.child("title").text(),
        quiz=tuple(_question(q) for q in root.child("quiz").items(min_items=3)),
    )
