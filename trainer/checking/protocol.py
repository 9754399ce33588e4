"""The calls between the checker and the learner's process, declared.

Every request the checker sends and every reply the learner's process gives is a
dataclass here, with one codec (:meth:`Message.encode`, :meth:`Message.decode`):
JSON fields checked against their annotations, tensors and other values through
:mod:`trainer.checking.values` (bytes, never pickles), nested messages as objects.
A reply comes from the learner's process, which is not trusted: a field of the
wrong type is a :class:`~trainer.checking.transport.WireError`, as a broken frame is.

Each request names its reply type and carries its handler: :meth:`Request.handle`
runs in the learner's process and is given the :class:`LearnerSide` (the loaded
answer, its process's helpers). The learner's process looks the request up by its
``op`` in :data:`REQUESTS`: a new request is one class here, with its reply and its
handler, and nothing else to register (see docs/engine.md).
"""

from __future__ import annotations

import dataclasses
import functools
import time
import types
import typing
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Protocol, TypeVar

import torch
import torch.utils._pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from trainer.checking import values
from trainer.checking.recording import BackwardTensors
from trainer.checking.transport import WireError

M = TypeVar("M", bound="Message")


def value(default: object = None) -> Any:
    """A field holding tensors, None, numbers or sequences of them (see :mod:`values`)."""
    return field(default=default, metadata={"value": True})


@dataclass
class Message:
    """A request or a reply; ``layout`` (requests only) is how tensors are handed over."""

    # The fields' types, read once as the class is made: the learner's process renames
    # the trainer's modules (see ``serve.look_plain``), where they could not be read.
    _types: ClassVar[dict[str, Any]] = {}
    _wire: ClassVar[_WireFields | None] = None  # see _wire_fields

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._types = typing.get_type_hints(cls)

    def encode(self) -> tuple[dict[str, Any], list[bytes]]:
        blobs: list[bytes] = []
        return self._header(blobs), blobs

    @classmethod
    def _wire_fields(cls) -> _WireFields:
        """The fields on the wire (all but ``layout``), read once per class: a message
        is encoded or decoded for every call, hundreds of times a check."""
        table = cls.__dict__.get("_wire")
        if table is None:
            table = _WireFields(
                tuple(
                    (item.name, bool(item.metadata.get("value")), cls._types.get(item.name))
                    for item in dataclasses.fields(cls)
                    if item.name != "layout"
                )
            )
            cls._wire = table
        return table

    def _header(self, blobs: list[bytes]) -> dict[str, Any]:
        layout = str(getattr(self, "layout", "plain"))
        header: dict[str, Any] = {}
        for name, holds_values, _ in self._wire_fields().fields:
            content = getattr(self, name)
            if holds_values:
                header[name] = values.encode(content, blobs, layout)
            elif isinstance(content, Message):
                header[name] = content._header(blobs)
            elif isinstance(content, list) and content and isinstance(content[0], Message):
                header[name] = [part._header(blobs) for part in content]
            else:
                header[name] = content
        return header

    @classmethod
    def decode(cls: type[M], header: object, blobs: list[bytes]) -> M:
        """The message ``header`` describes, which has exactly the fields :meth:`encode`
        writes: a frame of something else is refused, not read with defaults."""
        if not isinstance(header, dict):
            raise WireError(f"{cls.__name__}: not an object")
        table = cls._wire_fields()
        keys = set(header) - ({"op"} if issubclass(cls, Request) else set())
        if keys != table.names:
            odd = sorted(keys ^ table.names)
            raise WireError(f"{cls.__name__}: fields {', '.join(odd)} missing or unknown")
        found: dict[str, Any] = {}
        for name, holds_values, hint in table.fields:
            raw = header[name]
            if holds_values:
                found[name] = values.decode(raw, blobs)
            else:
                found[name] = _read(raw, hint, blobs, f"{cls.__name__}.{name}")
        return cls(**found)


class _WireFields:
    """A message class's fields on the wire: (name, holds values, annotation) each."""

    def __init__(self, fields: tuple[tuple[str, bool, Any], ...]) -> None:
        self.fields = fields
        self.names = frozenset(name for name, _, _ in fields)


@functools.cache
def _shape_of(kind: Any) -> tuple[Any, tuple[Any, ...]]:
    """An annotation's origin and arguments (``list[int]``: list, (int,)), once each."""
    return typing.get_origin(kind), typing.get_args(kind)


def _read(raw: object, kind: Any, blobs: list[bytes], where: str) -> Any:
    """``raw`` as a value of type ``kind``, or a WireError naming ``where``."""
    origin, arguments = _shape_of(kind)
    if origin in (typing.Union, types.UnionType):
        for option in arguments:
            try:
                return _read(raw, option, blobs, where)
            except WireError:
                continue
    elif kind is Any or (kind is type(None) and raw is None):
        return raw
    elif origin is list and isinstance(raw, list):
        (item,) = arguments
        return [_read(r, item, blobs, where) for r in raw]
    elif origin is dict and isinstance(raw, dict) and all(isinstance(k, str) for k in raw):
        return raw
    elif isinstance(kind, type) and issubclass(kind, Message):
        return kind.decode(raw, blobs)
    elif kind is float and type(raw) in (int, float):
        return float(raw)  # type: ignore[arg-type]
    elif kind in (bool, int, str) and type(raw) is kind:
        return raw
    raise WireError(f"{where}: {type(raw).__name__} is not a {getattr(kind, '__name__', kind)}")


# -- a learner process: what the zygote is asked for -----------------------------------------


@dataclass
class LearnerFacts(Message):
    """The little the learner's process knows of the exercise: what the answer is called
    and looks like, the file and its text. No spec, no reference, no expected value."""

    class_name: str = ""
    param_names: list[str] = field(default_factory=list)
    outputs: int = 1
    form: str = "function"
    file: str = ""
    cwd: str = ""
    source: str = ""


@dataclass
class Spawn(Message):
    """A checker asks the learner zygote for a learner process (three descriptors go with
    it: its control socket, its calls socket, the output pipe). ``scratch`` and
    ``cgroup`` are the zygote's to fill in, for the process it makes."""

    learner: LearnerFacts = field(default_factory=LearnerFacts)
    memory_limit_mb: int | None = None
    confine: dict[str, Any] | None = None  # host protection's settings (HostLimits.for_job)
    imports: list[str] = field(default_factory=list)  # torch modules its calls will import
    # More checks may follow (a watch, a class): the zygote makes the next one's process
    # ahead. False for a service of one check: the spare would only cost CPU while the
    # check runs, and time to end.
    more: bool = True
    # The second process of a check that runs some stages ahead (trusted/ahead.py):
    # not one more check.
    second: bool = False
    scratch: str | None = None  # its own folder
    cgroup: str | None = None  # how a memory cgroup caps it, once capped

    def to_wire(self) -> dict[str, Any]:
        return {"op": "spawn", **self.encode()[0]}

    @classmethod
    def from_wire(cls, header: object) -> Spawn:
        if not isinstance(header, dict) or header.get("op") != "spawn":
            raise WireError("not a spawn request")
        return cls.decode({k: v for k, v in header.items() if k != "op"}, [])


# -- replies ---------------------------------------------------------------------------------


@dataclass
class LearnerError(Message):
    """The learner's code failed: what to tell the learner."""

    message: str = "your code failed"
    details: list[str] = field(default_factory=list)
    mistake: str = ""  # the classic mistake's id, when the failure itself says which
    jvp: dict[str, Any] | None = None  # what jvp returned that torch refused (count, shape)


@dataclass
class Reply(Message):
    """What every reply may carry: the learner's failure, the names of torch its code
    replaced (put back by the learner's process before replying), or a bug of ours."""

    error: LearnerError | None = None
    patched: list[str] = field(default_factory=list)
    bug: str | None = None  # a bug of ours in the learner's process: its traceback


@dataclass
class ProtectionReply(Reply):
    protection: dict[str, Any] | None = None


@dataclass
class LoadReply(Reply):
    protection: dict[str, Any] | None = None
    problem: LearnerError | None = None  # the file does not load, or defines no answer
    optional_inputs: int = 0  # forward's defaulted parameters (-1: *args)


@dataclass
class ForwardReply(Reply):
    outputs: object = value()
    handle: int | None = None  # to call backward on, when an input requires grad
    no_graph: bool = False
    foreign_graph: bool = False
    advice: dict[str, Any] | None = None  # what forward saved for backward


@dataclass
class BackwardReply(Reply):
    result: object = value()
    modified: list[int] = field(default_factory=list)  # grad_output positions changed in place
    # forward's inputs and outputs (named) whose values backward changed
    changed: list[str] = field(default_factory=list)


@dataclass
class SecondReply(Reply):
    second: object = value()
    detached: bool = False


@dataclass
class TrainReply(Reply):
    grads: object = value()
    stacked: object = value()  # one tensor per input, a first dimension of calls
    calls: int | None = None
    moved: list[str] = field(default_factory=list)  # ``later``: the counters moved ahead


@dataclass
class ByHandReply(Reply):
    findings: list[str] = field(default_factory=list)
    message: str = ""
    details: list[str] = field(default_factory=list)


@dataclass
class MarkDirtyReply(Reply):
    same: list[int | None] = field(default_factory=list)
    modified: list[bool] = field(default_factory=list)
    rebased: list[bool] = field(default_factory=list)
    grads: object = value()


@dataclass
class NonDifferentiableReply(Reply):
    outputs: object = value()
    requires_grad: list[bool] = field(default_factory=list)
    marked: list[bool] = field(default_factory=list)
    grads: object = value()


@dataclass
class Tangents(Reply):
    tangents: object = value()


@dataclass
class JvpReply(Reply):
    has_jvp: bool = False
    has_setup_context: bool = False
    saves_for_forward: bool = False
    dual: list[Tangents] = field(default_factory=list)
    func: list[Tangents] = field(default_factory=list)


@dataclass
class VmapReply(Reply):
    has_setup_context: bool = False
    has_vmap_rule: bool = False
    outputs: object = value()
    grads: object = value()


# -- requests --------------------------------------------------------------------------------


class LearnerAnswer(Protocol):
    """The learner's answer, whatever its form (``learner.answers``)."""

    name: str
    form: str

    @property
    def custom_op(self) -> Any: ...  # the op, for the custom_op form; else None

    def apply(self, *args: Any) -> Any: ...
    def own_graph(self, outputs: list[Any]) -> list[Any]: ...
    def call_backward(self, node: Any, grads: list[Any]) -> Any: ...


class LearnerSide(Protocol):
    """What a request's handler is given in the learner's process (``serve._Server``):
    the loaded answer, words for a failure of the learner's code, and the handlers of
    the requests declared here."""

    @property
    def answer(self) -> LearnerAnswer | None: ...
    def failed(self, error: BaseException, during: str) -> LearnerError: ...

    def protection(self, request: Protection) -> ProtectionReply: ...
    def load(self, request: Load) -> LoadReply: ...
    def forward(self, request: Forward) -> ForwardReply: ...
    def backward(self, request: Backward) -> BackwardReply: ...
    def double(self, request: Double) -> SecondReply: ...
    def train(self, request: Train) -> TrainReply: ...
    def by_hand(self, request: ByHand) -> ByHandReply: ...
    def reset(self, request: Reset) -> Reply: ...
    def mark_dirty(self, request: MarkDirty) -> MarkDirtyReply: ...
    def non_differentiable(self, request: NonDifferentiable) -> NonDifferentiableReply: ...
    def jvp(self, request: Jvp) -> JvpReply: ...
    def vmap(self, request: Vmap) -> VmapReply: ...
    def second_order(self, request: SecondOrder) -> SecondReply: ...


# Every request type, by its op: what the learner's process decodes a request with.
REQUESTS: dict[str, type[Request[Any]]] = {}

R = TypeVar("R", bound=Reply)


@dataclass
class Request(Message, Generic[R]):
    """A call of the learner's process; ``R`` its reply type (``reply``, at run time)."""

    op: ClassVar[str]
    reply: ClassVar[type[Reply]] = Reply
    answer_words: ClassVar[str] = "a reply"  # what a reply that cannot be read was

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "op" in cls.__dict__:
            if cls.op in REQUESTS:
                raise TypeError(f"two requests are named {cls.op!r}")
            REQUESTS[cls.op] = cls

    def encode(self) -> tuple[dict[str, Any], list[bytes]]:
        header, blobs = super().encode()
        return {"op": self.op, **header}, blobs

    def handle(self, learner: LearnerSide) -> Reply:
        """Run in the learner's process; the reply goes back to the checker."""
        raise NotImplementedError


def decode_request(header: object, blobs: list[bytes]) -> Request[Any]:
    """The request a frame from the checker holds (its ``op`` names the type)."""
    op = header.get("op") if isinstance(header, dict) else None
    kind = REQUESTS.get(op) if isinstance(op, str) else None
    if kind is None:
        raise WireError(f"unknown request {op!r}")
    return kind.decode(header, blobs)


@dataclass
class Protection(Request[ProtectionReply]):
    """How the learner's process is protected (asked before load: a file that ends its
    process at import still has its level named)."""

    op = "protection"
    reply = ProtectionReply

    def handle(self, learner: LearnerSide) -> Reply:
        return learner.protection(self)


@dataclass
class Load(Request[LoadReply]):
    """Import the learner's file, watched, and find its answer."""

    op = "load"
    reply = LoadReply

    def handle(self, learner: LearnerSide) -> Reply:
        return learner.load(self)


@dataclass
class Forward(Request[ForwardReply]):
    """forward through ``apply``; ``keep`` the graph to call backward on later."""

    op = "forward"
    reply = ForwardReply
    answer_words = "forward's result"
    args: object = value()
    requires_grad: list[bool] = field(default_factory=list)
    keep: bool = True
    device: str = "cpu"
    layout: str = "plain"

    def handle(self, learner: LearnerSide) -> Reply:
        return learner.forward(self)


@dataclass
class Backward(Request[BackwardReply]):
    """backward of a kept forward call, as autograd's engine calls it, with ``grads``."""

    op = "backward"
    reply = BackwardReply
    answer_words = "backward's result"
    handle_id: int = -1
    grads: object = value()
    device: str = "cpu"
    layout: str = "plain"

    def handle(self, learner: LearnerSide) -> Reply:
        return learner.backward(self)


@dataclass
class Reset(Request[Reply]):
    """Forget the kept forward calls."""

    op = "reset"

    def handle(self, learner: LearnerSide) -> Reply:
        return learner.reset(self)


@dataclass
class Call(Message):
    """One call of the Function: its arguments, which require grad, the upstream gradients."""

    args: object = value()
    requires_grad: list[bool] = field(default_factory=list)
    upstream: object = value()


@dataclass
class Double(Request[SecondReply]):
    """The learner's backward differentiated once more (double backward), along ``vector``."""

    op = "double"
    reply = SecondReply
    args: object = value()
    requires_grad: list[bool] = field(default_factory=list)
    upstream: object = value()
    vector: object = value()

    def handle(self, learner: LearnerSide) -> Reply:
        return learner.double(self)


@dataclass
class Train(Request[TrainReply]):
    """Calls as in training, through autograd's engine; ``scenario`` combines ``sets``."""

    op = "train"
    reply = TrainReply
    scenario: str = "repeat"
    sets: list[Call] = field(default_factory=list)
    order: list[int] | None = None
    budget: float = 3.0
    shared: list[int] = field(default_factory=list)
    fresh: bool = False  # a fresh copy of the file, without the state of earlier calls

    def handle(self, learner: LearnerSide) -> Reply:
        return learner.train(self)


@dataclass
class ByHand(Request[ByHandReply]):
    """One more watched call, then what the derivation watch saw since the import."""

    op = "by_hand"
    reply = ByHandReply
    args: object = value()
    requires_grad: list[bool] = field(default_factory=list)
    upstream: object = value()

    def handle(self, learner: LearnerSide) -> Reply:
        return learner.by_hand(self)


@dataclass
class MarkDirty(Request[MarkDirtyReply]):
    op = "api_mark_dirty"
    reply = MarkDirtyReply
    args: object = value()
    requires_grad: list[bool] = field(default_factory=list)
    upstream: object = value()

    def handle(self, learner: LearnerSide) -> Reply:
        return learner.mark_dirty(self)


@dataclass
class NonDifferentiable(Request[NonDifferentiableReply]):
    op = "api_non_differentiable"
    reply = NonDifferentiableReply
    args: object = value()
    requires_grad: list[bool] = field(default_factory=list)
    upstream: object = value()

    def handle(self, learner: LearnerSide) -> Reply:
        return learner.non_differentiable(self)


@dataclass
class Jvp(Request[JvpReply]):
    """Output tangents for each set of input tangents (dual tensors, torch.func.jvp)."""

    op = "api_jvp"
    reply = JvpReply
    args: object = value()
    tangents: object = value()  # one list per set: a tensor or None per argument

    def handle(self, learner: LearnerSide) -> Reply:
        return learner.jvp(self)


@dataclass
class Vmap(Request[VmapReply]):
    """The Function under torch.func.vmap: ``mode`` forward, engine or grad."""

    op = "api_vmap"
    reply = VmapReply
    args: object = value()
    requires_grad: list[bool] = field(default_factory=list)
    in_dims: list[int | None] = field(default_factory=list)
    upstream: object = value()
    mode: str = "forward"

    def handle(self, learner: LearnerSide) -> Reply:
        return learner.vmap(self)


@dataclass
class SecondOrder(Request[SecondReply]):
    """d<grads, vector>/d(inputs, upstream), as gradgradcheck takes it."""

    op = "api_second_order"
    reply = SecondReply
    args: object = value()
    requires_grad: list[bool] = field(default_factory=list)
    upstream: object = value()
    vector: object = value()

    def handle(self, learner: LearnerSide) -> Reply:
        return learner.second_order(self)


@dataclass
class OpCheckReply(Reply):
    failed: dict[str, str] = field(default_factory=dict)  # test -> why, for each that failed


@dataclass
class OpCheck(Request[OpCheckReply]):
    """torch.library.opcheck on a custom op answer: its schema, its autograd registration
    and its fake (meta) implementation, which torch.compile relies on."""

    op = "opcheck"
    reply = OpCheckReply
    args: object = value()
    requires_grad: list[bool] = field(default_factory=list)
    tests: list[str] = field(default_factory=list)

    def handle(self, learner: LearnerSide) -> Reply:
        answer = learner.answer
        op = answer.custom_op if answer is not None else None
        if op is None:
            return OpCheckReply(error=LearnerError("the answer is not a custom op"))
        args = leaves(self.args, self.requires_grad)
        try:
            results = torch.library.opcheck(
                op, tuple(args), test_utils=tuple(self.tests), raise_exception=False
            )
        except BaseException as error:  # the learner's code may raise anything
            return OpCheckReply(error=learner.failed(error, "torch.library.opcheck"))
        return OpCheckReply(
            failed={
                str(test): str(outcome) for test, outcome in results.items() if outcome != "SUCCESS"
            }
        )


def listed(value: object) -> list[Any]:
    """A decoded sequence as a list; anything else (the learner's process may send
    anything) as an empty one."""
    return list(value) if isinstance(value, tuple | list) else []


def leaves(value: object, flags: Sequence[bool]) -> list[Any]:
    """The arguments of a call; the tensors flagged in ``flags`` become fresh leaves that
    require grad."""
    args = listed(value)
    for index, arg in enumerate(args):
        if isinstance(arg, torch.Tensor) and index < len(flags) and flags[index]:
            args[index] = arg.detach().requires_grad_(True)
    return args


@dataclass
class AutocastReply(Reply):
    outputs: object = value()
    grads: object = value()


@dataclass
class Autocast(Request[AutocastReply]):
    """forward, then backward through autograd's engine, both under ``torch.autocast``
    (CPU, ``dtype``), as a mixed-precision training step may call them."""

    op = "autocast"
    reply = AutocastReply
    args: object = value()
    requires_grad: list[bool] = field(default_factory=list)
    upstream: object = value()
    dtype: str = "bfloat16"

    def handle(self, learner: LearnerSide) -> Reply:
        answer = learner.answer
        if answer is None:
            return AutocastReply(error=LearnerError("the answer was not loaded"))
        args = leaves(self.args, self.requires_grad)
        wanted = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
        with torch.autocast("cpu", dtype=getattr(torch, self.dtype)):
            try:
                result = answer.apply(*args)
                outputs = answer.own_graph(listed(result) or [result])
            except BaseException as error:  # the learner's code may raise anything
                return AutocastReply(error=learner.failed(error, "forward under torch.autocast"))
            weighted = [
                (o.float() * u.float()).sum()
                for o, u in zip(outputs, listed(self.upstream), strict=False)
                if isinstance(o, torch.Tensor) and o.requires_grad and isinstance(u, torch.Tensor)
            ]
            try:  # inside the context too, as some training loops call backward
                loss = torch.stack(weighted).sum()
                grads = torch.autograd.grad(loss, wanted, allow_unused=True)
            except BaseException as error:  # the learner's backward may raise anything
                return AutocastReply(
                    outputs=outputs, error=learner.failed(error, "backward under torch.autocast")
                )
        return AutocastReply(outputs=outputs, grads=list(grads))


# -- the interviewer's follow-ups (trusted/follow_ups.py) -------------------------------------


def _measured_call(learner: LearnerSide, args: object, requires_grad: list[bool]) -> Any:
    """One forward call of the answer on fresh leaves: (outputs, its autograd node), or
    the learner's failure (a LearnerError)."""
    answer = learner.answer
    if answer is None:
        return LearnerError("the answer did not load")
    called = leaves(args, requires_grad)
    try:
        result = answer.apply(*called)
    except BaseException as error:  # the learner's code may raise anything
        return learner.failed(error, "forward")
    outputs = [o for o in (result if isinstance(result, tuple | list) else (result,))]
    tensors = [o for o in outputs if isinstance(o, torch.Tensor)]
    node = next((t.grad_fn for t in tensors if t.grad_fn is not None), None)
    if node is None:
        return LearnerError("forward's outputs are not connected to autograd's graph")
    return called, tensors, node


@dataclass
class SavedReply(Reply):
    elements: int = 0
    bytes: int = 0
    kept: list[str] = field(default_factory=list)  # each tensor: where it is kept, its shape


@dataclass
class Saved(Request[SavedReply]):
    """What one forward call keeps for backward: the tensors of ctx.save_for_backward and
    the tensors held as attributes of ctx (in a list, tuple or dict too), each once."""

    op = "follow_up_saved"
    reply = SavedReply
    args: object = value()
    requires_grad: list[bool] = field(default_factory=list)

    def handle(self, learner: LearnerSide) -> Reply:
        called = _measured_call(learner, self.args, self.requires_grad)
        if isinstance(called, LearnerError):
            return SavedReply(error=called)
        _, _, ctx = called
        try:
            kept = [(f"saved tensor {i + 1}", t) for i, t in enumerate(ctx.saved_tensors)]
        except RuntimeError:  # nothing saved, or freed
            kept = []
        for name, held in sorted(vars(ctx).items()) if hasattr(ctx, "__dict__") else []:
            inner = held.values() if isinstance(held, dict) else held
            items = list(inner) if isinstance(inner, list | tuple) else [held]
            kept += [(f"ctx.{name}", t) for t in items if isinstance(t, torch.Tensor)]
        reply, seen = SavedReply(), set()
        for where, tensor in kept:
            if tensor is None:
                continue
            key = (tensor.data_ptr(), tuple(tensor.shape), tuple(tensor.stride()))
            if key in seen:
                continue
            seen.add(key)
            reply.elements += tensor.numel()
            reply.bytes += tensor.numel() * tensor.element_size()
            reply.kept.append(f"{where} {tuple(tensor.shape)}")
        return reply


def _backward_call(
    learner: LearnerSide, request: WorkingMemory | BackwardTime
) -> tuple[Any, Any, list[Any]] | LearnerError:
    """A forward call kept for backward: its outputs, leaves and the upstream gradients."""
    called = _measured_call(learner, request.args, request.requires_grad)
    if isinstance(called, LearnerError):
        return called
    args, tensors, _ = called
    floats = [t for t in tensors if t.is_floating_point()]
    inputs = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
    return floats, inputs, listed(request.upstream)


class _Allocations(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """The bytes that tensors made by aten ops hold, while they live, and their peak: each
    new storage counted once (a view or an in-place result is no new memory), and
    given back when the last tensor seen holding it dies."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.live = 0
        self.peak = 0
        self._held: dict[int, list[int]] = {}  # storage address -> [bytes, tensors seen]

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # else torch imports torch._dynamo at the first op (over a second)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        result = func(*args, **(kwargs or {}))
        given = {id(a) for a in pytree.tree_leaves((args, kwargs))}
        for tensor in pytree.tree_leaves(result):
            if not isinstance(tensor, torch.Tensor) or id(tensor) in given:
                continue
            storage = tensor.untyped_storage()
            address, size = storage.data_ptr(), storage.nbytes()
            if not size or (tensor._is_view() and address not in self._held):
                continue
            if address not in self._held:
                self._held[address] = [size, 0]
                self.live += size
                self.peak = max(self.peak, self.live)
            self._held[address][1] += 1
            weakref.finalize(tensor, self._dead, address)
        return result

    def _dead(self, address: int) -> None:
        held = self._held.get(address)
        if held is None:
            return
        held[1] -= 1
        if held[1] <= 0:
            self.live -= held[0]
            del self._held[address]


@dataclass
class WorkingMemoryReply(Reply):
    peak_bytes: int = 0


@dataclass
class WorkingMemory(Request[WorkingMemoryReply]):
    """The peak of the memory that tensors created during one backward call hold (its
    result included), through autograd's engine."""

    op = "follow_up_working_memory"
    reply = WorkingMemoryReply
    args: object = value()
    requires_grad: list[bool] = field(default_factory=list)
    upstream: object = value()

    def handle(self, learner: LearnerSide) -> Reply:
        call = _backward_call(learner, self)
        if isinstance(call, LearnerError):
            return WorkingMemoryReply(error=call)
        outputs, inputs, upstream = call
        meter = _Allocations()
        try:
            with meter:
                grads = torch.autograd.grad(outputs, inputs, upstream, allow_unused=True)
        except BaseException as error:  # the learner's code may raise anything
            return WorkingMemoryReply(error=learner.failed(error, "backward"))
        del grads
        return WorkingMemoryReply(peak_bytes=meter.peak)


@dataclass
class BackwardTimeReply(Reply):
    seconds: list[float] = field(default_factory=list)


@dataclass
class BackwardTime(Request[BackwardTimeReply]):
    """How long backward takes, warm: ``repeats`` timed calls on one kept graph."""

    op = "follow_up_backward_time"
    reply = BackwardTimeReply
    args: object = value()
    requires_grad: list[bool] = field(default_factory=list)
    upstream: object = value()
    repeats: int = 7

    def handle(self, learner: LearnerSide) -> Reply:
        call = _backward_call(learner, self)
        if isinstance(call, LearnerError):
            return BackwardTimeReply(error=call)
        outputs, inputs, upstream = call
        seconds: list[float] = []
        try:
            for attempt in range(2 + max(1, min(self.repeats, 50))):
                started = time.perf_counter()
                torch.autograd.grad(outputs, inputs, upstream, retain_graph=True, allow_unused=True)
                if attempt >= 2:  # the first two warm up
                    seconds.append(time.perf_counter() - started)
        except BaseException as error:  # the learner's code may raise anything
            return BackwardTimeReply(error=learner.failed(error, "backward"))
        return BackwardTimeReply(seconds=seconds)


# -- the first wrong gradient, walking backward (trusted/intermediates.py) --------------------

# How much a LayerTensors reply may hold: far more than a layer-by-layer backward of the
# small runs it is asked on makes; past it the checker concludes nothing it did not find.
LAYER_TENSORS_MOST = 2048
LAYER_TENSORS_BYTES = 32 << 20


@dataclass
class LayerTensorsReply(Reply):
    tensors: object = value()  # copies of the tensors backward made, in order
    returned: list[bool] = field(default_factory=list)  # each: one of backward's results
    truncated: bool = False  # more were made than fit: some are not among them


@dataclass
class LayerTensors(Request[LayerTensorsReply]):
    """One forward call, then its backward called directly as the engine calls it,
    under :class:`~trainer.checking.recording.BackwardTensors`: copies of the tensors
    backward's ops made with as many elements as one of ``shapes`` (the layers of the
    spec's chain), each marked when it is one of backward's results. Only the shapes
    come here, never a value the checker expects."""

    op = "layer_tensors"
    reply = LayerTensorsReply
    answer_words = "the tensors backward made"
    args: object = value()
    requires_grad: list[bool] = field(default_factory=list)
    upstream: object = value()
    shapes: list[list[int]] = field(default_factory=list)
    most: int = LAYER_TENSORS_MOST
    most_bytes: int = LAYER_TENSORS_BYTES

    def handle(self, learner: LearnerSide) -> Reply:
        called = _measured_call(learner, self.args, self.requires_grad)
        if isinstance(called, LearnerError):
            return LayerTensorsReply(error=called)
        _, _, node = called
        answer = learner.answer
        assert answer is not None  # _measured_call said so
        sizes = [_elements(shape) for shape in self.shapes]
        recorder = BackwardTensors(sizes, min(self.most, LAYER_TENSORS_MOST), self.most_bytes)
        try:
            with recorder:
                result = answer.call_backward(node, listed(self.upstream))
        except BaseException as error:  # the learner's code may raise anything
            return LayerTensorsReply(error=learner.failed(error, "backward"))
        return LayerTensorsReply(
            tensors=recorder.kept,
            returned=recorder.made_into(listed(result) or [result]),
            truncated=recorder.truncated,
        )


def _elements(shape: Sequence[int]) -> int:
    count = 1
    for size in shape:
        count *= size
    return count


def _every_message(kind: type[Message]) -> list[type[Message]]:
    found = [kind]
    for sub in kind.__subclasses__():
        found += _every_message(sub)
    return found


# Read here, in the process every learner process is forked from, not once in each.
for _kind in _every_message(Message):
    _kind._wire_fields()
