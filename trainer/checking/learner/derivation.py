"""Notice a Function whose gradient torch derives instead of the learner.

Runs in the learner's process, around calls of the learner's Function::

    with DerivationWatch(MySigmoid) as watch:
        result = MySigmoid.backward(ctx, grad_output)   # or an engine-driven call
    if watch.findings:
        message, details = explain(watch.findings)

While the block runs, the class's own ``forward``, ``setup_context``,
``backward`` and ``vjp`` (those it defines) are wrapped so that the watch knows
exactly when the learner's code runs, whether the code calls them directly or
the autograd engine does. Only what happens *inside* those methods counts: the
caller's own forward and backward passes around them never do.

What counts (a finding each; ``DerivationFinding.kind`` in brackets):

``engine``
    A backward pass of torch's autograd engine runs inside the method:
    ``torch.autograd.grad``, ``torch.autograd.backward``, ``Tensor.backward``,
    ``torch.autograd.functional.*`` (vjp, jvp, hvp, jacobian, hessian, ...),
    ``torch.func.vjp``, ``grad``, ``grad_and_value``, ``jacrev``, ``hessian``
    (reported as ``torch.func.jacfwd``, which it is made of), recomputation by
    ``torch.utils.checkpoint`` and anything else that runs the engine. Seen by a
    ``TorchDispatchMode``: an aten op executed by an autograd node other than
    the one the method was entered under (``torch._C._current_autograd_node()``,
    ``torch._C._current_graph_task_id()``). A second, mode-independent count
    catches passes the mode cannot see (no op dispatched, mode switched off,
    another thread): the engine numbers its graph tasks from one global counter,
    which the watch reads before and after the method with a tiny backward pass
    of its own.
``kernel``
    A call of one of torch's own derivative kernels: every aten op whose name
    contains ``backward`` (``aten.sigmoid_backward``, ``_softmax_backward_data``,
    ``threshold_backward``, ``gelu_backward``, ``convolution_backward``,
    ``native_layer_norm_backward``, ``mse_loss_backward``, ... 262 overloads in
    torch 2.13) plus ``_dirichlet_grad``, ``_standard_gamma_grad`` and ``glu_jvp``,
    however reached: ``torch.ops.aten.*``, ``torch._softmax_backward_data``,
    ``torch._log_softmax_backward_data``, ``torch.batch_norm_backward_elemt``,
    ``torch.nn.grad.conv2d_input`` and friends (named as such).
``forward_ad``
    An op runs while a forward-mode AD level is open that was not open when the
    method started: ``torch.autograd.forward_ad`` dual tensors, ``torch.func.jvp``,
    ``jacfwd``, ``linearize``, ``torch.autograd.functional.jacobian(...,
    strategy="forward-mode")``.
``graph``
    The learner's own code reads ``Tensor.grad_fn`` (or ``torch.autograd.graph.
    get_gradient_edge``) and gets a node: calling a node runs torch's derivative
    formula for that op without the engine (outside the engine only: inside it,
    a node of another graph computes nothing). Reads by torch's own functions
    (printing a tensor) do not count: a torch-function mode is off while torch
    runs a function it dispatched.
``tamper``
    The watch was switched off or its wrapper replaced while the method ran.

Allowed: ordinary tensor operations, including ``torch.sigmoid``,
``torch.softmax``, ``torch.where``, ``einsum``, ``matmul`` and in-place ops;
``torch.func.vmap`` used as a loop; a backward whose ops record a graph
because the engine runs it with ``create_graph=True`` (double backward: the
graph is built, no node of it runs inside the backward); ``torch.enable_grad()``
blocks that build a graph without running it; the learner's own helpers;
``Function.apply`` of a custom Function (that is its forward; its backward
only runs in a backward pass, which counts); calling another Function's
``backward`` by hand counts only for the machinery it uses itself.

What a determined cheater can still do (the verdict is computed elsewhere, so
these only matter for this "derive it yourself" rule):

* Notice the watch (``torch._C._len_torch_dispatch_mode()``, the wrapped
  method, ``sys._getframe``) and behave only while unwatched. Watching every
  call of the method closes this; watching a sample of calls does not.
* Switch the mode off for a moment (``torch.utils._python_dispatch.
  _disable_current_modes()`` and similar) and call a backward kernel or use
  forward-mode AD in that gap; backward passes in such a gap are still counted
  by the graph-task counter, and a mode left off is reported as ``tamper``.
* Copy torch's formula by hand or reach the derivative some other way
  (finite differences, sympy, a table saved in the file).
  That is not torch deriving the gradient through the calls above.
* Call nodes reached without reading ``grad_fn`` (``next_functions`` of a
  node obtained before the watch began, e.g. stored by ``forward`` when
  forward is not watched). Watching ``forward`` too closes the common case.
* Register a hook in ``forward`` (``ctx.register_prehook``, a tensor hook):
  it runs in the caller's backward pass, outside the watched methods, and
  what it does there is not watched. No hook runs when ``backward`` is called
  directly, as the learner's process does for the gradient check, so a
  gradient computed by a hook cannot reach that result.
* Compile a function for the first time inside the watched method
  (``torch.compile``) and call a backward kernel from it: when ``torch._dynamo``
  is not loaded as the watch starts, the mode is a pass-through inside the
  traces torch.compile makes (so that ``torch.cond`` keeps working), and the
  compiled code does not call it. Loading ``torch._dynamo`` before the watch
  (1.2 s once, e.g. in a zygote before forking) closes this: the watch then
  keeps the mode out of traces and sees compiled code's ops, for about 5 µs
  more a call. A backward pass a compiled function runs is counted either way.

Other limits: the graph-task counter assumes no other thread runs backward
passes while a watched method runs (true in the learner's process). A
higher-order op (``torch.cond``) runs under the watch but records no graph of
its own there, which only matters for a double backward.

Cost (torch 2.13 CPU, one core, ``python -m trainer.checking.learner.derivation``):
a direct call of a sigmoid backward on 100 float32 elements (3 ops) takes
6 µs unwatched and 60 µs watched; forward plus an engine-driven backward 21 µs
and 118 µs (two watched methods). About 40 µs a call is fixed (wrapping the
methods 6, the two modes 4, the two counter probes 12, bookkeeping); each op
adds about 5 µs (layer norm's backward, 11 ops: 20 µs, 103 µs watched).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import os
import sys
import timeit
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from torch.autograd.variable import Variable
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import (
    TorchDispatchMode,
    _get_current_dispatch_mode_stack,
    _pop_mode,
    _push_mode,
)

Kind = Literal["engine", "kernel", "forward_ad", "graph", "tamper"]

WATCHED_METHODS = ("forward", "setup_context", "backward", "vjp")

# Derivative kernels whose names do not say "backward".
EXTRA_KERNELS = frozenset({"_dirichlet_grad", "_standard_gamma_grad", "glu_jvp"})

# Public entry points, named as a learner writes them. A frame of any of these
# functions (or of a function defined inside one) names the call.
_PUBLIC_ENTRIES: tuple[tuple[str, str, str], ...] = (
    ("torch.autograd.grad", "torch.autograd", "grad"),
    ("torch.autograd.backward", "torch.autograd", "backward"),
    ("Tensor.backward", "torch", "Tensor.backward"),
    ("torch.autograd.graph.get_gradient_edge", "torch.autograd.graph", "get_gradient_edge"),
    ("torch.autograd.forward_ad.make_dual", "torch.autograd.forward_ad", "make_dual"),
    ("torch.autograd.forward_ad.unpack_dual", "torch.autograd.forward_ad", "unpack_dual"),
    *(
        (f"torch.autograd.functional.{name}", "torch.autograd.functional", name)
        for name in ("vjp", "jvp", "jacobian", "hessian", "vhp", "hvp")
    ),
    *(
        (f"torch.func.{name}", "torch.func", name)
        for name in ("grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian")
    ),
    ("torch.func.linearize", "torch.func", "linearize"),
    # vjp returns a closure made here; the engine runs when the closure is called.
    ("torch.func.vjp", "torch._functorch.eager_transforms", "_vjp_with_argnums"),
    *(
        (f"torch.nn.grad.conv{d}d_{what}", "torch.nn.grad", f"conv{d}d_{what}")
        for d in (1, 2, 3)
        for what in ("input", "weight")
    ),
)

# torch modules that only pass a call on: never the name of what the learner called.
_PLUMBING = (
    "torch._ops",
    "torch.overrides",
    "torch.utils._python_dispatch",
    "torch.utils._contextlib",
    "torch._compile",
    "torch._dynamo",
)

# Directories as code objects name their files (not resolved: same spelling).
_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_STDLIB_DIR = os.path.dirname(functools.__file__) + os.sep
_GRAD_FN_GETTERS = tuple(
    torch._C.TensorBase.__dict__[name]
    for name in ("grad_fn", "_grad_fn")
    if name in torch._C.TensorBase.__dict__
)
_ENGINE = Variable._execution_engine
_current_node = torch._C._current_autograd_node
_current_task = torch._C._current_graph_task_id


@dataclass(frozen=True)
class DerivationFinding:
    """One way the watched code let torch derive a gradient."""

    kind: Kind
    call: str  # what the learner called, e.g. "torch.autograd.grad", "aten.sigmoid_backward"
    detail: str  # a few words for the learner
    method: str  # the learner's method it happened in: "backward", "forward", ...


def explain(findings: Sequence[DerivationFinding]) -> tuple[str, list[str]]:
    """A message and detail lines for the learner, in the checker's usual shape."""
    methods = ", ".join(dict.fromkeys(f.method for f in findings)) or "backward"
    calls = ", ".join(dict.fromkeys(f.call for f in findings))
    message = (
        f"{methods} lets torch work out the gradient instead of deriving it: it uses {calls}. "
        "The exercise is to derive the gradient yourself and write it with ordinary "
        "tensor operations."
    )
    details = [f"{f.call} (in {f.method}): {f.detail}" for f in findings]
    details.append(
        "Not allowed in forward or backward: torch.autograd.grad/backward, Tensor.backward, "
        "torch.autograd.functional, torch.func.grad/vjp/jvp/jacrev/jacfwd/hessian, "
        "forward-mode dual tensors, reading .grad_fn, and torch's own *_backward kernels. "
        "Allowed: ordinary tensor operations and torch.func.vmap."
    )
    return message, details


@dataclass
class _Bracket:
    """What was true when one call of a watched method began."""

    method: str
    task: int
    node: object
    forward_ad: bool
    counter: int | None
    probes: int
    seen_tasks: set[int] = field(default_factory=set)
    flagged_ops: set[object] = field(default_factory=set)
    saw_pass: bool = False


class DerivationWatch:
    """Records what torch machinery a Function's own methods use to derive gradients.

    ``with DerivationWatch(MyFunction) as watch: <call backward>``; then
    ``watch.findings`` (empty when the learner derived the gradient) and
    ``watch.calls`` (how many times each method ran under the watch: a backward
    that ran zero times was not watched). One watch, one ``with`` block.
    """

    def __init__(self, function: type[torch.autograd.Function]) -> None:
        self.function = function
        self.calls: dict[str, int] = {}
        self._findings: dict[tuple[str, str], DerivationFinding] = {}
        self._brackets: list[_Bracket] = []
        self._probing = False
        self._probes = 0
        self._installed: dict[str, tuple[object, object]] = {}  # name -> (raw before, wrapper)
        compiled = "torch._dynamo" in sys.modules
        self._ops = (_CompiledOpWatch if compiled else _OpWatch)(self)
        self._reads = _GraphReadWatch(self)
        self._used = False

    @property
    def findings(self) -> list[DerivationFinding]:
        return list(self._findings.values())

    # The block -----------------------------------------------------------------

    def __enter__(self) -> DerivationWatch:
        if self._used:
            raise RuntimeError("a DerivationWatch watches one block; make a new one")
        self._used = True
        self._install()
        self._ops.__enter__()  # type: ignore[no-untyped-call]
        self._reads.__enter__()  # type: ignore[no-untyped-call]
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            # A mode the learner's code left above ours (torch.set_default_device
            # pushes one) stays; only a mode that is gone counts as tampering.
            if not _leave(
                self._reads, _function_mode_stack, _pop_function_mode, _push_function_mode
            ):
                self._tamper("was switched off")
            if not _leave(self._ops, _get_current_dispatch_mode_stack, _pop_mode, _push_mode):
                self._tamper("was switched off")
        finally:
            self._uninstall()

    def _install(self) -> None:
        cls = self.function
        for name in WATCHED_METHODS:
            original = getattr(cls, name, None)
            if original is None or original is getattr(torch.autograd.Function, name, None):
                continue
            if not callable(original):
                continue
            wrapper = staticmethod(_watched(self, name, original))
            self._installed[name] = (cls.__dict__.get(name, _MISSING), wrapper)
            setattr(cls, name, wrapper)

    def _uninstall(self) -> None:
        cls = self.function
        for name, (before, wrapper) in self._installed.items():
            if cls.__dict__.get(name) is not wrapper:
                self._tamper(f"lost its hold on {name}")
            if before is _MISSING:
                if name in cls.__dict__:
                    delattr(cls, name)
            else:
                setattr(cls, name, before)
        self._installed.clear()

    # One call of a watched method ------------------------------------------------

    def _open(self, method: str) -> None:
        self.calls[method] = self.calls.get(method, 0) + 1
        counter = self._read_counter()
        self._brackets.append(
            _Bracket(
                method=method,
                task=_current_task(),
                node=_current_node(),
                forward_ad=_forward_level_open(),
                counter=counter,
                probes=self._probes,
            )
        )

    def _close(self) -> None:
        bracket = self._brackets.pop()
        inner_probes = self._probes - bracket.probes
        counter = self._read_counter()
        if bracket.counter is not None and counter is not None and not bracket.saw_pass:
            passes = counter - bracket.counter - 1 - inner_probes
            if passes > 0:
                self._add(
                    "engine",
                    "autograd backward pass",
                    f"{passes} backward pass{'es' if passes > 1 else ''} of torch's autograd "
                    "ran during it, out of the watch's sight",
                    bracket,
                )
        if self._ops not in _get_current_dispatch_mode_stack():
            self._tamper("was switched off")

    def _read_counter(self) -> int | None:
        self._probing = True
        try:
            return _PROBE.read()
        finally:
            self._probing = False
            self._probes += 1

    # What the modes see ------------------------------------------------------------

    def _see_op(self, func: torch._ops.OpOverload) -> None:
        bracket = self._brackets[-1]
        task = _current_task()
        node = _current_node()
        if task != bracket.task or node is not bracket.node:
            if task not in bracket.seen_tasks:
                bracket.seen_tasks.add(task)
                self._mark_pass(bracket)
                what = type(node).__name__ if node is not None else "a node"
                self._add(
                    "engine",
                    _entry_name() or "autograd backward pass",
                    f"runs a backward pass of torch's autograd (it executed {what}), "
                    "so torch derives the gradient",
                    bracket,
                )
            return
        if not bracket.forward_ad and _forward_level_open():
            # Forward-mode formulas call backward kernels themselves: one finding.
            if "forward_ad" not in bracket.flagged_ops:
                bracket.flagged_ops.add("forward_ad")
                self._add(
                    "forward_ad",
                    _entry_name() or "torch.autograd.forward_ad",
                    "uses forward-mode automatic differentiation (dual tensors), "
                    "so torch derives the derivative",
                    bracket,
                )
            return
        if _is_kernel(func) and func not in bracket.flagged_ops:
            bracket.flagged_ops.add(func)
            kernel = func._schema.name.replace("::", ".")
            call = _entry_name() or kernel
            detail = "is torch's own backward kernel" + ("" if call == kernel else f" ({kernel})")
            self._add("kernel", call, detail, bracket)

    def _see_graph_read(self) -> None:
        # torch functions that honour torch-function modes (printing a tensor,
        # torch.autograd.grad) run with this mode off, so their reads are not seen.
        bracket = self._brackets[-1]
        self._add(
            "graph",
            _entry_name() or "Tensor.grad_fn",
            "reads the graph autograd recorded; its nodes compute torch's own derivatives",
            bracket,
        )

    def _mark_pass(self, bracket: _Bracket) -> None:
        for open_bracket in self._brackets:
            open_bracket.saw_pass = True
        bracket.saw_pass = True

    def _tamper(self, what: str) -> None:
        method = self._brackets[-1].method if self._brackets else "backward"
        key = ("tamper", what)
        if key not in self._findings:
            self._findings[key] = DerivationFinding(
                "tamper", "the derivation watch", f"the watch on your code {what}", method
            )

    def _add(self, kind: Kind, call: str, detail: str, bracket: _Bracket) -> None:
        if (kind, call) not in self._findings and len(self._findings) < 20:
            self._findings[(kind, call)] = DerivationFinding(kind, call, detail, bracket.method)


_MISSING = object()


def _watched(
    watch: DerivationWatch, method: str, original: Callable[..., Any]
) -> Callable[..., Any]:
    @functools.wraps(original)
    def watched(*args: Any, **kwargs: Any) -> Any:
        watch._open(method)
        try:
            return original(*args, **kwargs)
        finally:
            watch._close()

    return watched


# The code of every wrapper made by _watched: where a stack walk stops.
def _wrapper_code() -> types.CodeType:
    """The code of the wrapper around the learner's methods, looked up when needed: the
    learner's process renames this module's code (see ``serve.look_plain``)."""
    return next(c for c in _watched.__code__.co_consts if isinstance(c, types.CodeType))


class _OpWatch(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Sees every aten op, including those a nested engine run executes."""

    # torch.cond and other higher-order ops reach __torch_dispatch__ (and pass
    # on) instead of failing with "no rule registered ... for mode".
    supports_higher_order_operators = True

    def __init__(self, watch: DerivationWatch) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.watch = watch

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # Else torch wraps __torch_dispatch__ in torch._dynamo.disable, which
        # imports torch._dynamo (over a second) at the first op. _CompiledOpWatch
        # keeps that wrapping, for processes that have imported it anyway.
        return False

    def __torch_dispatch__(
        self,
        func: torch._ops.OpOverload,
        types: Sequence[type],
        args: Sequence[Any] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        if torch.compiler.is_compiling():
            # torch.compile, first used inside the watched method, is tracing
            # through this mode (torch.cond does, with fullgraph=True): it gets
            # a pass-through. See _CompiledOpWatch.
            return func(*args, **(kwargs or {}))
        watch = self.watch
        if watch._brackets and not watch._probing:
            watch._see_op(func)
        return func(*args, **(kwargs or {}))


class _CompiledOpWatch(_OpWatch):  # type: ignore[no-untyped-call]
    """The same, kept out of torch.compile's traces, for when torch._dynamo is loaded.

    torch then wraps ``__torch_dispatch__`` in ``torch._dynamo.disable``: compiled
    code calls the mode for every op, as eager code does.
    """

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return True

    __torch_dispatch__ = _OpWatch.__torch_dispatch__


class _GraphReadWatch(TorchFunctionMode):
    """Sees reads of ``Tensor.grad_fn``, the way to call autograd nodes by hand."""

    def __init__(self, watch: DerivationWatch) -> None:
        super().__init__()
        self.watch = watch

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Sequence[type],
        args: Sequence[Any] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        result = func(*args, **(kwargs or {}))
        watch = self.watch
        if (
            result is not None
            and watch._brackets
            and not watch._probing
            and getattr(func, "__self__", None) in _GRAD_FN_GETTERS
        ):
            watch._see_graph_read()
        return result


class _CounterProbe:
    """Reads the engine's graph-task counter by running a one-node backward pass."""

    def __init__(self) -> None:
        self._graph: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None
        self._seen: list[int] = []

    def _build(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if self._graph is None:
            with torch.inference_mode(False), torch.enable_grad():
                leaf = torch.zeros((), requires_grad=True)
                out = leaf.view_as(leaf)
            node = out.grad_fn
            assert node is not None
            node.register_prehook(self._hook)
            self._graph = (leaf, out, torch.ones(()))
        return self._graph

    def _hook(self, grad_outputs: tuple[torch.Tensor, ...]) -> None:
        self._seen.append(_current_task())

    def read(self) -> int | None:
        try:
            leaf, out, seed = self._build()
            # Straight to the engine, past both modes: about 6 µs.
            with torch._C._DisableTorchDispatch():
                _ENGINE.run_backward((out,), (seed,), True, False, (leaf,), True, False)
        except RuntimeError:  # e.g. autograd switched off entirely
            return None
        return self._seen.pop() if self._seen else None


_PROBE = _CounterProbe()


def _forward_level_open() -> bool:
    """Whether a forward-mode AD level is open (torch supports one at a time)."""
    try:
        level = torch._C._enter_dual_level()
    except RuntimeError:
        return True
    torch._C._exit_dual_level(level)
    return False


@functools.cache
def _is_kernel(func: torch._ops.OpOverload) -> bool:
    if not isinstance(func, torch._ops.OpOverload):
        return False  # a higher-order op such as torch.cond: its body's ops are seen
    name = func._schema.name.split("::")[-1]
    return "backward" in name or name in EXTRA_KERNELS


def _function_mode_stack() -> list[Any]:
    return [torch._C._get_function_stack_at(i) for i in range(torch._C._len_torch_function_stack())]


def _pop_function_mode() -> Any:
    return torch._C._pop_torch_function_stack()


def _push_function_mode(mode: Any) -> None:
    torch._C._push_on_torch_function_stack(mode)


def _leave(
    mode: TorchDispatchMode | TorchFunctionMode,
    stack: Callable[[], Sequence[Any]],
    pop: Callable[[], Any],
    push: Callable[[Any], None],
) -> bool:
    """Exit ``mode`` wherever it is on its stack; False when it is not there."""
    if not any(m is mode for m in stack()):
        return False
    above = []
    while stack()[-1] is not mode:
        above.append(pop())
    mode.__exit__(None, None, None)
    for other in reversed(above):
        push(other)
    return True


@functools.lru_cache(maxsize=1)
def _public_codes() -> dict[types.CodeType, str]:
    codes: dict[types.CodeType, str] = {}
    for public, module_name, path in _PUBLIC_ENTRIES:
        try:
            target: Any = importlib.import_module(module_name)
            for part in path.split("."):
                target = getattr(target, part)
        except (ImportError, AttributeError):
            continue
        code = getattr(inspect.unwrap(target), "__code__", None)
        if isinstance(code, types.CodeType):
            _add_codes(codes, code, public)
    return codes


def _add_codes(codes: dict[types.CodeType, str], code: types.CodeType, public: str) -> None:
    codes.setdefault(code, public)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _add_codes(codes, const, public)


def _entry_name() -> str | None:
    """What the learner called to get here, from the Python stack.

    Walks outwards from the watch's own frames through torch's (and the standard
    library's) frames up to the first frame of other code, the learner's; stops
    at the wrapper around the learner's method. The outermost frame of a known
    public function names the call; else the outermost torch frame that is not
    mere plumbing; else nothing (a C function called from the learner's code).
    """
    public_codes = _public_codes()
    public: str | None = None
    fallback: str | None = None
    wrapper_code = _wrapper_code()
    this_file = _watched.__code__.co_filename
    frame: types.FrameType | None = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        filename = code.co_filename
        if code is wrapper_code:
            break  # the wrapper around the learner's method
        if filename == this_file:  # the watch's own frames, wherever they are
            frame = frame.f_back
            continue
        in_torch = filename.startswith(_TORCH_DIR)
        if not in_torch and not filename.startswith(_STDLIB_DIR):
            break  # the learner's code
        name = public_codes.get(code)
        if name is not None:
            public = name
        elif in_torch:
            module = str(frame.f_globals.get("__name__", ""))
            if module.startswith("torch") and not module.startswith(_PLUMBING):
                qualname = getattr(code, "co_qualname", code.co_name).split(".<locals>")[0]
                fallback = f"{module}.{qualname}"
        frame = frame.f_back
    return public or fallback


def _measure() -> None:  # pragma: no cover - a measurement, run by hand
    class Sigmoid(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
            y = torch.sigmoid(x)
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx: Any, g: torch.Tensor) -> Any:
            (y,) = ctx.saved_tensors
            return g * y * (1 - y)

    x = torch.randn(100, requires_grad=True)
    g = torch.randn(100)
    ctx = Sigmoid.apply(x).grad_fn  # type: ignore[no-untyped-call]

    def direct() -> None:
        Sigmoid.backward(ctx, g)

    def engine() -> None:
        torch.autograd.grad(Sigmoid.apply(x), x, g)  # type: ignore[no-untyped-call]

    def watched(run: Callable[[], None]) -> Callable[[], None]:
        def run_watched() -> None:
            with DerivationWatch(Sigmoid):
                run()

        return run_watched

    for name, run in (("direct backward call", direct), ("forward + engine backward", engine)):
        for how, timed in (("unwatched", run), ("watched", watched(run))):
            best = min(timeit.repeat(timed, number=5000, repeat=5)) / 5000
            print(f"{name}, {how}: {best * 1e6:.1f} µs")


if __name__ == "__main__":  # pragma: no cover
    _measure()
