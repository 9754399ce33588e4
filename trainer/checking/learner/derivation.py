"""Notice a Function whose gradient torch derives instead of the learner.

Runs in the learner's process, from before the learner's file is imported to the
end of the check (:mod:`serve`)::

    watch = DerivationWatch()
    watch.start()                      # a dispatch mode, on for the rest of the process
    with watch.importing():
        module = import_source(...)    # the file's first line to its last
    watch.adopt(MySigmoid)             # every staticmethod of the class, wrapped
    ...                                # every request: watch.hold() first
    if watch.findings:
        message, details = explain(watch.findings)

(``with DerivationWatch(MySigmoid) as watch: ...`` does the same for one block.)
Every staticmethod the class (or a base of its own) defines is wrapped:
``forward``, ``setup_context``, ``backward``, ``vjp``, ``jvp``, ``vmap`` and any
helper, so that the watch knows exactly when the learner's code runs, whether
the code calls them directly, the autograd engine does, or torch.func does. Only
what happens *inside* those methods and during the import counts: the checker's
own forward and backward passes around them (the 500 calls in a row, the double
backward that differentiates through backward) never do.

What counts inside a method (a finding each; ``DerivationFinding.kind`` in brackets):

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
    of its own. A torch.func transform other than ``vmap`` entered inside the
    method (``grad``, ``vjp``, ``jacrev``) counts too, seen by the torch-function
    mode through torch.func's interpreter stack.
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
    strategy="forward-mode")``; and ``torch.func.jvp`` inside a ``jvp``
    staticmethod that torch.func.jvp itself called (a level is open already
    there: the new transform level gives it away).
``graph``
    The learner's own code reads ``Tensor.grad_fn`` (or ``torch.autograd.graph.
    get_gradient_edge``) and gets a node: calling a node runs torch's derivative
    formula for that op without the engine (outside the engine only: inside it,
    a node of another graph computes nothing). Reads by torch's own functions
    (printing a tensor) do not count: a torch-function mode is off while torch
    runs a function it dispatched.
``bypass``
    A ``vmap`` staticmethod whose outputs reach its inputs through nodes of
    torch's own that compute (not only views, stacks and copies) without passing
    a node of the class: under ``torch.func.vmap`` autograd would derive those
    per-sample gradients and the learner's backward would never run. A rule that
    calls ``MyFn.apply`` on the batch, or on each sample in a loop, is fine.
``numeric``
    Finite differences and the complex step (see :mod:`numeric` for the exact
    construction): a tensor perturbed by two different small steps (``x + h``,
    ``x - h``), a division by a step taken (``/ h``, ``/ (2 * h)``), ``forward``
    called on a perturbed copy, or a complex tensor in a method other than
    ``forward`` of a Function whose tensors are real. Recomputing forward's
    function on the saved input (``torch.sigmoid(x)`` in backward), or an
    epsilon guard (``x + 1e-12``), is not a finite difference.
``symbolic``
    ``sympy`` named in the learner's source or held by its module (checked once,
    after the import; torch's own lazy use of sympy does not count).
``tamper``
    The watch was switched off or its wrapper replaced while the method ran, or
    between two requests (``hold`` puts it back and reports it).

At import (``importing``), torch may differentiate eagerly: a file that tests
its Function (``torch.autograd.gradcheck(MyFn.apply, ...)``, ``MyFn.apply(x)
.sum().backward()``, a comparison with ``torch.autograd.grad`` of the reference)
passes. What is kept from an eager pass is values at inputs the file chose,
while the check's inputs are drawn when it runs. What counts at import is a
derivation that a graph tracer records, replayable on any input (``traced``):
an engine pass, a backward kernel or forward-mode AD while an op is being
recorded into a graph: a tensor subclass with its own dispatch (FakeTensor,
FunctionalTensor), torch's proxy, fake or functional mode (``make_fx``,
``aot_autograd``, ``torch.export``), another Python dispatch mode (one of the
learner's that records ops), ``torch.jit.trace`` or ``torch.compile``. Which
pass a recorded graph came from is not decidable at the op, so tracing a
gradient at import counts even when the file traces its own Function.

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

* Switch the mode off for a moment (``torch.utils._python_dispatch.
  _disable_current_modes()`` and similar) and call a backward kernel or use
  forward-mode AD in that gap; backward passes in such a gap are still counted
  by the graph-task counter, and a mode left off is reported as ``tamper``.
* Copy torch's formula by hand, or keep a table of values in the file. That is
  not torch deriving the gradient through the calls above.
* Keep a value torch derived eagerly at import and use it later: only useful
  for a gradient that does not depend on the inputs (a constant Jacobian).
* Call nodes reached without reading ``grad_fn`` inside a method
  (``next_functions`` of a node kept from the import, its saved tensors
  overwritten through ``.data``); a node whose formula is a backward kernel is
  still seen when it runs.
* Register a hook in ``forward`` (``ctx.register_prehook``, a tensor hook), a
  signal handler, a ``gc`` callback or a finalizer: it runs outside the watched
  methods, and what it does there is not watched op by op (a backward pass it
  runs during the 500 calls in a row, or in the engine's pass before a watched
  backward, is still counted: those counts start at the checker's pass). No hook runs when
  ``backward`` is called directly (the contract stage and this stage do), so
  such a backward must still be right by itself there.
* Compile a function for the first time inside the watched method
  (``torch.compile``) and call a backward kernel from it: when ``torch._dynamo``
  is not loaded as the watch starts, the mode is a pass-through inside the
  traces torch.compile makes (so that ``torch.cond`` keeps working), and the
  compiled code does not call it. Loading ``torch._dynamo`` before the watch
  (1.2 s once, e.g. in a zygote before forking) closes this: the watch then
  keeps the mode out of traces and sees compiled code's ops, for two C calls
  more an op. A backward pass a compiled function runs is counted either way.
* Finite differences in a form :mod:`numeric` does not name (a step in a
  tensor of many elements, a multiplicative step, Python or NumPy numbers),
  sympy reached through an obfuscated import.

Other limits: the graph-task counter assumes no other thread runs backward
passes while a watched method runs (the learner's process has one thread).
A higher-order op (``torch.cond``) runs under the watch but records no graph of
its own there, which only matters for a double backward.

Cost (torch 2.13 CPU, ``python -m trainer.checking.learner.derivation``, CPU time of
one process on a shared 2-core machine): a direct call of a sigmoid backward on 100
float32 elements (3 ops) takes 9 µs unwatched and 112 µs watched; forward plus an
engine-driven backward 39 µs and 209 µs, or 154 µs in a counted stretch (the 500
calls in a row: no counter probe per call). The two modes are pushed by the
outermost watched call and taken off when it ends, so the checker's own ops and
torch functions between calls pass no Python mode. What remains a call: torch's
Python dispatch, about 6 µs an op inside the learner's methods plus the watch's
look at each (a few µs); the torch-function mode, about 4 µs a torch function
called there; a counter probe, about 10 µs (two for a call outside a backward
pass, one inside it, none in a counted stretch); bookkeeping, about 10 µs.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import importlib
import inspect
import os
import sys
import time
import types
import weakref
from collections.abc import Callable, Iterator, Sequence
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

from trainer.checking.learner import guard, numeric
from trainer.checking.learner.loading import torchs

Kind = Literal[
    "engine",
    "kernel",
    "forward_ad",
    "graph",
    "tamper",
    "traced",
    "bypass",
    "numeric",
    "symbolic",
]

# The bracket around the import of the learner's file is named so.
IMPORT = "import"

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
# torch's Python formulas live here, in modules loaded before the learner's file or by it
# (torch._decomp.decompositions_for_jvp, say): a frame of a formula there counts as one.
_DECOMP_DIR = os.path.join(_TORCH_DIR, "_decomp") + os.sep
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
    method: str  # where it happened: "backward", "forward", ..., or "import"


_NUMERIC_KINDS = frozenset({"numeric", "symbolic"})


def _where(method: str) -> str:
    return "importing your file" if method == IMPORT else method


def explain(findings: Sequence[DerivationFinding]) -> tuple[str, list[str]]:
    """A message and detail lines for the learner, in the checker's usual shape."""
    methods = ", ".join(dict.fromkeys(_where(f.method) for f in findings)) or "backward"
    calls = ", ".join(dict.fromkeys(f.call for f in findings))
    kinds = {f.kind for f in findings}
    if kinds and kinds <= _NUMERIC_KINDS:
        how = (
            "lets sympy derive the gradient"
            if kinds == {"symbolic"}
            else "approximates the gradient numerically"
            if kinds == {"numeric"}
            else "approximates the gradient numerically or lets sympy derive it"
        )
        verb = f"{how} instead of deriving it by hand"
    else:
        verb = "lets torch work out the gradient instead of deriving it"
    if kinds == {"tamper"}:  # the watch itself taken out of play: what it could not see
        message = (
            f"{methods} switches off the check of how the gradient is derived "
            f"({', '.join(dict.fromkeys(_how_switched(f.detail) for f in findings))}): "
            "what runs under it could be torch's own gradient. The exercise is to derive the "
            "gradient yourself and write it with ordinary tensor operations."
        )
    else:
        message = (
            f"{methods} {verb}: it uses {calls}. "
            "The exercise is to derive the gradient yourself and write it with ordinary "
            "tensor operations."
        )
    details = [f"{f.call} (in {_where(f.method)}): {f.detail}" for f in findings]
    details.append(
        "Not allowed in your file (its import and every method of the Function): "
        "torch.autograd.grad/backward, Tensor.backward, torch.autograd.functional, "
        "torch.func.grad/vjp/jvp/jacrev/jacfwd/hessian, forward-mode dual tensors, reading "
        ".grad_fn, torch's own *_backward kernels, graph tracers (make_fx, torch.compile, "
        "a dispatch mode) tracing a gradient, finite differences, the complex step and "
        "sympy. Allowed: ordinary tensor operations, torch.func.vmap, and testing your own "
        "Function with autograd when the file is imported."
    )
    return message, details


def _how_switched(detail: str) -> str:
    """The switch a tamper finding names (``... switched off with torch._C.X``), or what
    happened to the watch."""
    return (
        detail.split(" with ", 1)[1]
        if " with " in detail
        else detail.removeprefix("the watch on your code ")
    )


@dataclass
class _Bracket:
    """What was true when one call of a watched method (or the import) began."""

    method: str
    task: int
    node: object
    forward_ad: bool
    counter: int | None
    probes: int
    lenient: bool = False  # the import: only traced derivations count
    level: int = 0  # torch.func's transform level at the start
    real: bool = True  # no complex tensor among the method's arguments
    # The torch-function mode, pushed for the call (and by the outermost call only;
    # torch.func runs a Function's staticmethods with torch-function modes set aside).
    pushed_reads: bool = False
    pushed_ops: bool = False  # the dispatch mode, pushed by the outermost call
    seen_tasks: set[int] = field(default_factory=set)
    flagged_ops: set[object] = field(default_factory=set)
    saw_pass: bool = False
    # Finite differences: the signed steps taken from each tensor (id -> the tensor's
    # weak reference and its steps: a freed tensor's id names the next one), their
    # sizes, and the perturbed copies made (id -> weak reference).
    perturbations: dict[int, tuple[weakref.ref[torch.Tensor], set[float]]] = field(
        default_factory=dict
    )
    steps: set[float] = field(default_factory=set)
    copies: dict[int, weakref.ref[torch.Tensor]] = field(default_factory=dict)
    # What is computed from a perturbed copy, and the differences made with one (id -> ref).
    derived: dict[int, weakref.ref[torch.Tensor]] = field(default_factory=dict)
    differences: dict[int, weakref.ref[torch.Tensor]] = field(default_factory=dict)
    # 0-dim tensors made from a number written in the method (torch.tensor(1e-6)).
    constants: dict[int, weakref.ref[torch.Tensor]] = field(default_factory=dict)


class DerivationWatch:
    """Records what torch machinery a Function's own methods use to derive gradients.

    For one block: ``with DerivationWatch(MyFunction) as watch: <calls>``; then
    ``watch.findings`` (empty when the learner derived the gradient) and
    ``watch.calls`` (how many times each method ran under the watch: a backward
    that ran zero times was not watched). One watch, one ``with`` block.

    For a whole process (the learner's): ``watch.start()`` before the learner's file
    runs, ``with watch.importing(): <import the file>``, ``watch.adopt(cls)`` once
    the class is known, and ``watch.hold()`` before each request, which puts back
    (and reports) a mode or wrapper the learner's code removed. Findings
    accumulate until the process ends.
    """

    # No instance dict: the learner's code, which shares this process, cannot put a
    # function of its own in place of a method on the one watch (``watch._add = ...``);
    # one put on the class is a patch the guard finds (``guard.also_guard``, below).
    __slots__ = (
        "_brackets",
        "_checkers_levels",
        "_classes",
        "_custom_ops",
        "_findings",
        "_installed",
        "_ops",
        "_passes_seen",
        "_probe_ids",
        "_probes",
        "_probing",
        "_reads",
        "_scope",
        "_started",
        "_used",
        "calls",
        "function",
    )

    def __init__(self, function: type[torch.autograd.Function] | None = None) -> None:
        self.function = function
        self.calls: dict[str, int] = {}
        self._findings: dict[tuple[str, str], DerivationFinding] = {}
        self._brackets: list[_Bracket] = []
        self._probing = False
        self._probes = 0
        self._probe_ids: list[int] = []  # the graph tasks the probes ran, in order
        self._passes_seen = 0  # backward passes the dispatch mode saw in a call
        self._scope: set[str] | None = None  # in a counted stretch: the methods called
        # (id of the owner, name) -> (owner, what it held before, the wrapper); an owner is
        # a class (its staticmethods), a custom op (its registered functions) or the op's
        # dict of kernels
        self._installed: dict[tuple[int, Any], tuple[object, object, object]] = {}
        self._classes: list[type] = []  # the classes whose methods are wrapped
        self._custom_ops: list[Any] = []  # the torch.library custom ops whose functions are
        compiled = "torch._dynamo" in sys.modules
        # The dual levels the checker's own jvp request has open: a method called inside
        # one finds a level open that is not the learner's (one left open at import is).
        self._checkers_levels = 0
        self._ops = (_CompiledOpWatch if compiled else _OpWatch)(self)
        if compiled:
            sys.modules["torch._dynamo"].eval_frame.skip_code(
                _CompiledOpWatch.__torch_dispatch__.__code__
            )
        self._reads = _FunctionWatch(self)
        self._used = False
        self._started = False

    @property
    def findings(self) -> list[DerivationFinding]:
        return list(self._findings.values())

    @property
    def started(self) -> bool:
        return self._started

    # The block -----------------------------------------------------------------

    def __enter__(self) -> DerivationWatch:
        if self._used:
            raise RuntimeError("a DerivationWatch watches one block; make a new one")
        self._used = True
        self.start()
        if self.function is not None:
            self.adopt(self.function)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # The whole process ---------------------------------------------------------

    def start(self) -> None:
        """From now on, the outermost watched call (or the import) pushes the two modes
        and takes them off when it ends: ops and torch functions outside the learner's
        code, the checker's own, pass no Python mode and cost nothing more. Any of
        torch's switches that turn the modes off, used by the learner's code, is
        reported (see :func:`watch_mode_switches`)."""
        self._used = True
        self._started = True
        if self not in _WATCHES:
            _WATCHES.append(self)

    def stop(self) -> None:
        try:
            while self._brackets:  # a call that never ended (only when stopped inside it)
                self._close()
        finally:
            self._started = False
            self._uninstall()

    @contextlib.contextmanager
    def importing(self) -> Iterator[None]:
        """The import of the learner's file: one bracket, where only a gradient that a
        graph tracer records counts (a self-test of the learner's own Function with
        autograd is fine, and values computed at import are values at inputs of the
        learner's choosing)."""
        self._open(IMPORT, (), lenient=True)
        try:
            yield
        finally:
            self._close()

    @contextlib.contextmanager
    def counted(self) -> Iterator[Callable[[], None]]:
        """A stretch of the checker's own code that counts its own backward passes
        (it calls the function this yields once for each): the watched calls inside
        it probe no counter, and one count over the whole stretch finds the passes the
        dispatch mode did not see. For the 500 calls in a row: two probes, not three
        a call."""
        if self._scope is not None or self._brackets:
            yield lambda: None  # nested, or inside a watched call: each call probes
            return
        declared = [0]
        methods: set[str] = set()
        first = self._read_counter()
        seen_before = self._passes_seen
        self._scope = methods
        try:
            yield lambda: declared.__setitem__(0, declared[0] + 1)
        finally:
            self._scope = None
            last = self._read_counter()
        if first is None or last is None or self._passes_seen != seen_before:
            return  # a pass seen by the mode is reported already
        hidden = last - first - 1 - declared[0] - self._probes_between(first, last)
        if hidden > 0:
            method = "backward" if "backward" in methods else ", ".join(sorted(methods))
            self._add(
                "engine",
                "autograd backward pass",
                f"{hidden} backward pass{'es' if hidden > 1 else ''} of torch's autograd "
                "ran during your calls, out of the watch's sight",
                _Bracket(method or "backward", -1, None, False, None, 0),
            )

    def adopt(self, function: type[torch.autograd.Function], also: bool = False) -> None:
        """Watch every staticmethod ``function`` (or a base of its own) defines; with
        ``also``, as well as the classes adopted before (a fresh copy of the file's
        class), else instead of them."""
        if not also:
            self._uninstall()
            self._classes.clear()
        if function not in self._classes:
            self._classes.append(function)
        if self.function is None or not also:
            self.function = function
        self._install()

    def adopt_custom_op(self, op: Any) -> None:
        """Watch a ``torch.library.custom_op`` answer: its kernels (forward), and what
        ``register_autograd`` registered (backward, setup_context). torch looks each up on
        the op at every call, so the wrappers sit where it looks."""
        self._uninstall()
        self._classes.clear()
        self._custom_ops = [op]
        self._install()

    def hold(self) -> None:
        """Before a request: the wrappers the learner's code removed since the last one
        are reported and put back; staticmethods added to a class are wrapped."""
        if not self._started:
            return
        for key, (owner, _, wrapper) in list(self._installed.items()):
            if _held(owner, key[1]) is not wrapper:
                self._tamper(f"lost its hold on {_method_of(owner, key[1])}")
                del self._installed[key]
        self._install()

    def _install(self) -> None:
        for cls in self._classes:
            for name, raw in _learner_staticmethods(cls).items():
                if (id(cls), name) not in self._installed:
                    if isinstance(raw, classmethod):  # the class comes first, then ctx
                        wrapper: object = classmethod(_watched(self, cls, name, raw.__func__))
                    else:
                        wrapper = staticmethod(_watched(self, cls, name, raw))
                    self._wrap(cls, name, wrapper)
        for op in self._custom_ops:
            for name in ("_setup_context_fn", "_backward_fn"):
                function = getattr(op, name, None)
                if callable(function) and (id(op), name) not in self._installed:
                    self._wrap(op, name, _watched(self, None, _method_of(op, name), function))
            kernels = getattr(op, "_backend_fns", None)
            for device, kernel in list(kernels.items()) if isinstance(kernels, dict) else []:
                if callable(kernel) and (id(kernels), device) not in self._installed:
                    self._wrap(kernels, device, _watched(self, None, "forward", kernel))

    def _wrap(self, owner: object, name: Any, wrapper: object) -> None:
        self._installed[(id(owner), name)] = (owner, _held(owner, name), wrapper)
        _put(owner, name, wrapper)

    def _uninstall(self) -> None:
        for (_, name), (owner, before, wrapper) in self._installed.items():
            if _held(owner, name) is not wrapper:
                self._tamper(f"lost its hold on {_method_of(owner, name)}")
            _put(owner, name, before)
        self._installed.clear()

    @contextlib.contextmanager
    def checkers_forward_ad(self) -> Iterator[None]:
        """Around the checker's own forward-mode AD (dual tensors, torch.func.jvp) of the
        learner's Function: the methods it calls run inside a level the checker opened."""
        self._checkers_levels += 1
        try:
            yield
        finally:
            self._checkers_levels -= 1

    # One call of a watched method ------------------------------------------------

    def _open(self, method: str, args: Sequence[Any], lenient: bool = False) -> None:
        self.calls[method] = self.calls.get(method, 0) + 1
        if method == "forward" and self._brackets and self._brackets[-1].copies:
            self._see_forward_call(args)
        with _NO_TORCH_FUNCTION():
            real = not numeric.any_complex(tuple(args))
        task = _current_task()
        # Called by autograd's engine: the pass it runs in is the count to start from
        # (graph tasks are numbered in order); else a probe of the counter. In a
        # counted stretch, the stretch counts instead.
        if self._scope is not None:
            self._scope.add(method)
            counter = None
        else:
            counter = task if task >= 0 else self._read_counter()
        outermost = not self._brackets
        if outermost:
            self._ops.__enter__()  # type: ignore[no-untyped-call]
        # torch.func runs a Function's staticmethods with torch-function modes set aside.
        pushed = outermost or not any(m is self._reads for m in _function_mode_stack())
        if pushed:
            _push_function_mode(self._reads)
        self._brackets.append(
            _Bracket(
                method=method,
                task=task,
                node=_current_node(),
                forward_ad=self._checkers_levels > 0 and _forward_level_open(),
                counter=counter,
                probes=self._probes,
                lenient=lenient,
                level=_functorch_level() or 0,
                real=real,
                pushed_reads=pushed,
                pushed_ops=outermost,
            )
        )

    def _close(self) -> None:
        bracket = self._brackets[-1]
        if bracket.pushed_reads and not _remove_function_mode(self._reads):
            self._tamper("was switched off")
        if bracket.pushed_ops:
            depth = torch._C._len_torch_dispatch_stack()
            if depth and torch._C._get_dispatch_stack_at(depth - 1) is self._ops:
                self._ops.__exit__(None, None, None)  # on top, as it almost always is
            # A mode the learner's code left above ours stays; only a mode that is
            # gone counts as tampering.
            elif not _leave(self._ops, _get_current_dispatch_mode_stack, _pop_mode, _push_mode):
                self._tamper("was switched off")
        elif self._ops not in _get_current_dispatch_mode_stack():
            self._tamper("was switched off")
        self._brackets.pop()
        counter = None if bracket.counter is None else self._read_counter()
        if (
            bracket.counter is not None
            and counter is not None
            and not bracket.saw_pass
            and not bracket.lenient
        ):
            passes = counter - bracket.counter - 1 - self._probes_between(bracket.counter, counter)
            if passes > 0:
                self._add(
                    "engine",
                    "autograd backward pass",
                    f"{passes} backward pass{'es' if passes > 1 else ''} of torch's autograd "
                    "ran during it, out of the watch's sight",
                    bracket,
                )

    def _read_counter(self) -> int | None:
        self._probing = True
        try:
            found = _PROBE.read()
        finally:
            self._probing = False
            self._probes += 1
        if found is not None:
            ids = self._probe_ids
            if len(ids) > 4096:  # keep what an open call may still need
                oldest = min((b.counter for b in self._brackets if b.counter), default=found)
                del ids[: bisect.bisect_left(ids, oldest)]
            ids.append(found)
        return found

    def _probes_between(self, first: int, last: int) -> int:
        """How many of the watch's own probes ran after pass ``first``, before ``last``."""
        ids = self._probe_ids
        return bisect.bisect_left(ids, last) - bisect.bisect_right(ids, first)

    # What the modes see ------------------------------------------------------------

    def _see_op(self, func: torch._ops.OpOverload, types: Sequence[type]) -> None:
        bracket = self._brackets[-1]
        task = _current_task()
        node = _current_node()
        if task != bracket.task or node is not bracket.node:
            if task not in bracket.seen_tasks:
                if bracket.lenient and not _tracing(types):
                    return  # an eager pass at import: a self-test
                bracket.seen_tasks.add(task)
                self._mark_pass(bracket)
                what = type(node).__name__ if node is not None else "a node"
                if bracket.lenient:
                    self._traced(bracket, f"a backward pass of torch's autograd ({what})")
                    return
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
                if bracket.lenient:
                    if _tracing(types):
                        bracket.flagged_ops.add("forward_ad")
                        self._traced(bracket, "forward-mode automatic differentiation")
                    return
                bracket.flagged_ops.add("forward_ad")
                self._add(
                    "forward_ad",
                    _entry_name() or "torch.autograd.forward_ad",
                    "uses forward-mode automatic differentiation (dual tensors), "
                    "so torch derives the derivative",
                    bracket,
                )
            return
        formula = _torch_formula_on_stack()
        if formula is not None and formula not in bracket.flagged_ops:
            bracket.flagged_ops.add(formula)
            if bracket.lenient:
                if _tracing(types):
                    self._traced(bracket, f"torch's own derivative formula {formula}")
                return
            self._add(
                "kernel",
                formula,
                "is torch's own derivative formula, written in Python (torch._decomp)",
                bracket,
            )
        if _is_kernel(func) and func not in bracket.flagged_ops:
            kernel = func._schema.name.replace("::", ".")
            if bracket.lenient:
                if _tracing(types):
                    bracket.flagged_ops.add(func)
                    self._traced(bracket, f"torch's own backward kernel {kernel}")
                return
            bracket.flagged_ops.add(func)
            call = _entry_name() or kernel
            detail = "is torch's own backward kernel" + ("" if call == kernel else f" ({kernel})")
            self._add("kernel", call, detail, bracket)

    def _see_numbers(self, func: torch._ops.OpOverload, args: tuple[Any, ...], result: Any) -> None:
        """Finite differences and the complex step, in a method (not the import)."""
        bracket = self._brackets[-1]
        complex_result = numeric.is_complex_result(result)
        if (
            bracket.real
            and bracket.method != "forward"
            and "complex" not in bracket.flagged_ops
            and complex_result
        ):
            bracket.flagged_ops.add("complex")
            self._add(
                "numeric",
                "complex step",
                "computes with complex tensors although the Function's tensors are real: "
                "imag(f(x + ih)) / h approximates the derivative numerically",
                bracket,
            )
        kind = numeric.arithmetic_kind(func)  # once per op: asked of every op
        if (
            bracket.real
            and "complex" not in bracket.flagged_ops
            and complex_result
            and numeric.off_the_real_line(result)
        ):
            bracket.flagged_ops.add("complex")
            self._add(
                "numeric",
                "complex step",
                "steps a real tensor off the real line (x + ih): imag(f(x + ih)) / h "
                "approximates the derivative numerically",
                bracket,
            )
        if kind == "constant":
            if isinstance(result, torch.Tensor) and result.dim() == 0:
                bracket.constants[id(result)] = weakref.ref(result)
            return
        step = None
        divides = False
        if kind is not None:  # a sigmoid or a sum takes no step and divides by none
            try:
                step = numeric.step_of(func, args, bracket.constants, kind)
                divides = numeric.divides_by_step(
                    func, args, bracket.steps, bracket.constants, bracket.differences, kind
                )
            except Exception:  # an odd argument (a fake or meta tensor): not a number
                return
        if (bracket.copies or bracket.constants) and isinstance(result, torch.Tensor):
            self._follow(bracket, func, kind, args, result)  # else nothing to follow yet
        if step is not None:
            tensor, h = step
            central = False
            # x[i] += h perturbs x itself: its base is what the difference is made from.
            for perturbed in _written(func, args, tensor):
                central = _take_step(bracket, perturbed, h) or central
            bracket.steps.add(abs(h))
            if isinstance(result, torch.Tensor):
                for copy in _written(func, args, result):
                    bracket.copies[id(copy)] = weakref.ref(copy)
            if central:
                self._finite_differences(
                    bracket, f"evaluates at x + h and x - h around one tensor (h = {abs(h):g})"
                )
        elif divides:
            self._finite_differences(
                bracket, "divides a difference by the step h it added to a tensor"
            )

    @staticmethod
    def _follow(
        bracket: _Bracket,
        func: torch._ops.OpOverload,
        kind: str | None,
        args: tuple[Any, ...],
        result: torch.Tensor,
    ) -> None:
        """Mark what ``result`` is made of: numbers written in the code (``2 * h``), a
        perturbed copy (``f(x + h)``), a difference of one (``f(x + h) - f(x)``). An op
        that writes into a view (``up[i] = up[i] + h``) marks the view's base as well."""
        if (
            bracket.constants  # 2 * h needs an h made of a number in this call
            and kind in numeric.ARITHMETIC
            and result.dim() == 0
            and all(numeric.is_number(a, bracket.constants) for a in args[:2])
        ):
            bracket.constants[id(result)] = weakref.ref(result)
        if not bracket.copies:
            return  # no perturbed copy yet in this call: nothing to follow
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if any(numeric.held(a, bracket.differences) for a in tensors):
            for marked in _written(func, args, result):
                bracket.differences[id(marked)] = weakref.ref(marked)
        elif any(
            numeric.held(a, bracket.copies) or numeric.held(a, bracket.derived) for a in tensors
        ):
            for marked in _written(func, args, result):
                bracket.derived[id(marked)] = weakref.ref(marked)
                if kind == "sub":
                    bracket.differences[id(marked)] = weakref.ref(marked)

    def _see_forward_call(self, args: Sequence[Any]) -> None:
        bracket = self._brackets[-1]
        for value in args:
            ref = bracket.copies.get(id(value)) if isinstance(value, torch.Tensor) else None
            if ref is not None and ref() is value:
                self._finite_differences(
                    bracket, "calls forward on a perturbed copy of a tensor (x + h)"
                )
                return

    def _finite_differences(self, bracket: _Bracket, detail: str) -> None:
        if bracket.method == IMPORT:
            return
        self._add(
            "numeric",
            "finite differences",
            f"{detail}: a difference quotient approximates the derivative numerically",
            bracket,
        )

    def _see_transform(self, level: int) -> None:
        """A torch.func transform other than vmap, entered inside the watched method."""
        bracket = self._brackets[-1]
        if bracket.lenient:
            return
        stack = torch._C._functorch.get_interpreter_stack() or []
        for interpreter in stack:
            if interpreter.level() <= bracket.level:
                continue
            key = interpreter.key()
            if key in _ALLOWED_TRANSFORMS or key in bracket.flagged_ops:
                continue
            bracket.flagged_ops.add(key)
            forward = key == torch._C._functorch.TransformType.Jvp
            self._add(
                "forward_ad" if forward else "engine",
                _entry_name() or f"torch.func ({key.name.lower()})",
                "uses a torch.func transform that derives "
                + ("the derivative in forward mode" if forward else "the gradient"),
                bracket,
            )

    def _see_graph_read(self) -> None:
        # torch functions that honour torch-function modes (printing a tensor,
        # torch.autograd.grad) run with this mode off, so their reads are not seen.
        bracket = self._brackets[-1]
        if bracket.lenient:
            return
        self._add(
            "graph",
            _entry_name() or "Tensor.grad_fn",
            "reads the graph autograd recorded; its nodes compute torch's own derivatives",
            bracket,
        )

    def _see_vmap_rule(self, cls: type, args: Sequence[Any], result: Any) -> None:
        """A ``vmap`` staticmethod whose outputs reach its inputs through torch's own
        graph nodes, not the class's: autograd would derive those gradients."""
        if not isinstance(result, tuple) or len(result) != 2:
            return
        self._probing = True  # reading grad_fn here is the watch's own doing
        try:
            through = _bypass(cls, list(args[2:]), result[0])
        finally:
            self._probing = False
        if through is not None:
            bracket = _Bracket("vmap", -1, None, False, None, 0)
            self._add(
                "bypass",
                f"vmap ({through})",
                "the vmap rule computes its outputs with ops that autograd records itself "
                f"({through}), not through {cls.__name__}.apply: under torch.func.vmap, "
                "autograd derives the gradient and your backward never runs",
                bracket,
            )

    def see_source(self, source: str, module: types.ModuleType | None) -> None:
        """sympy named in the learner's file or held by its module: symbolic differentiation."""
        line = numeric.sympy_in_source(source)
        name = (
            None
            if line is not None or module is None
            else numeric.sympy_in_module(module, self.function)
        )
        if line is None and name is None:
            return
        where = f"line {line} names sympy" if line is not None else f"`{name}` comes from sympy"
        bracket = _Bracket(IMPORT, -1, None, False, None, 0)
        self._add(
            "symbolic",
            "sympy",
            f"{where}: a computer algebra system differentiating the function is not a "
            "derivation by hand",
            bracket,
        )

    def _traced(self, bracket: _Bracket, what: str) -> None:
        self._add(
            "traced",
            _entry_name() or "a graph tracer",
            f"{what} ran under a graph tracer (make_fx, torch.compile, torch.jit.trace, a "
            "dispatch mode): the traced graph is torch's derivative, kept to be replayed",
            bracket,
        )

    def _mark_pass(self, bracket: _Bracket) -> None:
        self._passes_seen += 1
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


def _written(
    func: torch._ops.OpOverload, args: tuple[Any, ...], tensor: torch.Tensor
) -> list[torch.Tensor]:
    """``tensor``, and the base it is a view of when ``func`` writes into ``tensor`` in
    place (``up[i] += h``, ``up[i] = v``: the write changes ``up``). Inside the dispatch
    mode a view's base is known once the view is an argument, not yet as a result."""
    if not numeric.writes_first(func) or not args or args[0] is not tensor:
        return [tensor]
    base = tensor._base
    return [tensor] if base is None else [tensor, base]


def _take_step(bracket: _Bracket, tensor: torch.Tensor, h: float) -> bool:
    """Record that ``tensor`` was perturbed by ``h``; whether it now has two steps."""
    entry = bracket.perturbations.get(id(tensor))
    if entry is None or entry[0]() is not tensor:
        entry = (weakref.ref(tensor), set())
        bracket.perturbations[id(tensor)] = entry
    entry[1].add(h)
    return len(entry[1]) > 1


def _held(owner: object, name: Any) -> object:
    """What ``owner`` holds under ``name`` itself (not inherited): a class's own
    attribute, an object's instance attribute, a dict's item; _MISSING if none."""
    if isinstance(owner, dict):
        return owner.get(name, _MISSING)
    if isinstance(owner, type):
        return owner.__dict__.get(name, _MISSING)
    return vars(owner).get(name, _MISSING)


def _put(owner: object, name: Any, value: object) -> None:
    """Make ``owner`` hold ``value`` under ``name`` (_MISSING: hold nothing there)."""
    if isinstance(owner, dict):
        if value is _MISSING:
            owner.pop(name, None)
        else:
            owner[name] = value
    elif value is _MISSING:
        if name in vars(owner):
            delattr(owner, name)
    else:
        setattr(owner, name, value)


def _method_of(owner: object, name: object) -> str:
    """The Function method a watched name stands for: a class's staticmethod is itself; a
    custom op's registered functions are its backward and setup_context, its kernels
    (a dict's items) its forward."""
    if isinstance(owner, dict):
        return "forward"
    return {"_backward_fn": "backward", "_setup_context_fn": "setup_context"}.get(
        str(name), str(name)
    )


_ALLOWED_TRANSFORMS = frozenset(
    {torch._C._functorch.TransformType.Vmap, torch._C._functorch.TransformType.Functionalize}
)
_functorch_level = torch._C._functorch.maybe_current_level
_NO_TORCH_FUNCTION = torch._C.DisableTorchFunction


def _learner_staticmethods(cls: type) -> dict[str, Any]:
    """Every staticmethod the class or a base of its own defines (not torch's), by name,
    and the methods torch calls by name however they are defined."""
    found: dict[str, Any] = {}  # a function, or a classmethod (wrapped as one)
    for base in cls.__mro__:
        if torchs(base.__module__) or base is object:
            break
        for name, value in vars(base).items():
            if name in found or name.startswith("__"):
                continue
            if isinstance(value, staticmethod):
                found[name] = value.__func__
            elif isinstance(value, classmethod):
                found[name] = value  # wrapped as one (see DerivationWatch._install)
            elif name in _CALLED_BY_TORCH and callable(value):
                found[name] = value
    return found


# What torch's Function machinery calls by name.
_CALLED_BY_TORCH = ("forward", "setup_context", "backward", "vjp", "jvp", "vmap")


def _watched(
    watch: DerivationWatch, cls: type | None, method: str, original: Callable[..., Any]
) -> Callable[..., Any]:
    @functools.wraps(original)
    def watched(*args: Any, **kwargs: Any) -> Any:
        watch._open(method, args)
        try:
            result = original(*args, **kwargs)
        finally:
            watch._close()
        if method == "vmap" and cls is not None:
            watch._see_vmap_rule(cls, args, result)
        return result

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
        # keeps dynamo out its own way, for processes that have imported it anyway.
        return False

    def __torch_dispatch__(
        self,
        func: torch._ops.OpOverload,
        types: Sequence[type],
        args: Sequence[Any] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        watch = self.watch
        if not watch._brackets or watch._probing:
            return func(*args, **(kwargs or {}))
        if torch.compiler.is_compiling():
            # torch.compile, first used inside the watched method, is tracing
            # through this mode (torch.cond does, with fullgraph=True): it gets
            # a pass-through. See _CompiledOpWatch.
            return func(*args, **(kwargs or {}))
        watch._see_op(func, types)
        result = func(*args, **(kwargs or {}))
        if watch._brackets and not watch._brackets[-1].lenient:
            # Tensor methods used here (is_complex, dim, dtype) would pass the
            # torch-function mode: the watch's own questions cost no mode call.
            with _NO_TORCH_FUNCTION():
                watch._see_numbers(func, tuple(args), result)
        return result


class _CompiledOpWatch(_OpWatch):  # type: ignore[no-untyped-call]
    """The same, kept out of torch.compile's traces, for when torch._dynamo is loaded:
    compiled code calls the mode for every op, as eager code does.

    What ``torch._dynamo.disable`` would do around ``__torch_dispatch__`` (torch's own
    wrapping, ~1 µs an op), done here in two C calls: dynamo's frame evaluation is off
    while the mode looks at an op, and this method's own frame is one dynamo skips
    (``skip_code``, set by :class:`DerivationWatch` once the code has its final name).
    """

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # torch's wrapping: replaced by the one below

    def __torch_dispatch__(self, *call: Any) -> Any:  # (func, types, args, kwargs)
        prior = _set_eval_frame(None)
        try:
            return _OpWatch.__torch_dispatch__(self, *call)
        finally:
            _set_eval_frame(prior)


_set_eval_frame = torch._C._dynamo.eval_frame.set_eval_frame


class _FunctionWatch(TorchFunctionMode):
    """Sees reads of ``Tensor.grad_fn`` (the way to call autograd nodes by hand) and
    torch functions called inside a torch.func transform the method entered."""

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
        watch = self.watch
        if watch._brackets and not watch._probing:
            level = _functorch_level()
            if level is not None and level > watch._brackets[-1].level:
                watch._see_transform(level)
        result = func(*args, **(kwargs or {}))
        if (
            result is not None
            and watch._brackets
            and not watch._probing
            and getattr(func, "__self__", None) in _GRAD_FN_GETTERS
        ):
            watch._see_graph_read()
        return result


def _tracing(kinds: Sequence[type]) -> bool:
    """Whether the op being dispatched is being recorded into a graph: a tensor subclass
    with its own dispatch (FakeTensor, FunctionalTensor, ...), torch's proxy, fake or
    functional mode, another Python dispatch mode (above this one: its
    ``__torch_dispatch__`` is on the call stack; below: on the mode stack),
    torch.jit's tracer or torch.compile."""
    if any(t is not torch.Tensor and t is not torch.nn.Parameter for t in kinds):
        return True
    if any(torch._C._get_dispatch_mode(key) is not None for key in _INFRA_KEYS):
        return True
    if _get_current_dispatch_mode_stack() or torch._C._get_tracing_state() is not None:
        return True
    if torch.compiler.is_compiling():
        return True
    here = _OpWatch.__torch_dispatch__.__code__
    also = _CompiledOpWatch.__torch_dispatch__.__code__  # the watch's own, around it
    frame: types.FrameType | None = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "__torch_dispatch__" and code is not here and code is not also:
            return True
        frame = frame.f_back
    return False


_INFRA_KEYS = tuple(
    getattr(torch._C._TorchDispatchModeKey, name)
    for name in ("PROXY", "FAKE", "FUNCTIONAL")
    if hasattr(torch._C._TorchDispatchModeKey, name)
)


def _bypass(cls: type, operands: list[Any], outputs: Any) -> str | None:
    """The name of a node of torch's own through which an output of a vmap rule reaches
    one of its operands without passing a node of ``cls``; None when every path passes
    one (or nothing requires grad)."""
    targets: set[object] = set()
    for operand in operands:
        if isinstance(operand, torch.Tensor) and operand.requires_grad:
            edge = torch.autograd.graph.get_gradient_edge(operand)
            targets.add(edge.node)
    if not targets:
        return None
    listed = outputs if isinstance(outputs, tuple | list) else (outputs,)
    starts = [o.grad_fn for o in listed if isinstance(o, torch.Tensor) and o.grad_fn is not None]
    seen: set[tuple[int, bool]] = set()
    # (node, the first node of torch's that computes, met on the way from an output)
    stack: list[tuple[Any, str | None]] = [(node, None) for node in starts]
    while stack and len(seen) < 10_000:
        node, first = stack.pop()
        if node in targets:
            if first is not None:
                return first
            continue  # only views and copies on the way: no derivative
        key = (id(node), first is None)
        if key in seen:
            continue
        seen.add(key)
        if getattr(type(node), "_forward_cls", None) is cls:
            continue  # the learner's own backward takes it from here
        here = type(node).__name__ if first is None and _computes(node) else first
        for child, _ in node.next_functions:
            if child is not None:
                stack.append((child, here))
    return None


def _computes(node: object) -> bool:
    """Whether a node is more than bookkeeping (a view, a copy, accumulation)."""
    name = type(node).__name__
    return not name.startswith(
        ("AccumulateGrad", "ViewBackward", "PermuteBackward", "TransposeBackward",
         "UnsqueezeBackward", "SqueezeBackward", "ExpandBackward", "CloneBackward",
         "AliasBackward", "ToCopyBackward", "UnbindBackward", "SelectBackward",
         "StackBackward", "CatBackward", "SliceBackward", "UnsafeViewBackward",
         "ReshapeAliasBackward", "MovedimBackward", "AsStridedBackward")
    )  # fmt: skip


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


# The code of torch's own derivative formulas written in Python: torch._decomp's
# functions with "backward" or "jvp" in their name (native_layer_norm_backward, ...), by
# code object, with the name to report. Made once, before any learner process is forked.
_FORMULAS: dict[types.CodeType, str] = {}
_FORMULAS_FOUND: list[bool] = []  # whether find_torch_formulas ran in this process


def find_torch_formulas() -> None:
    """Collect :data:`_FORMULAS` from the torch._decomp modules loaded and their tables
    (every function, and what its decorators wrap)."""
    found: dict[types.CodeType, str] = {}
    functions: list[object] = []
    for name, module in list(sys.modules.items()):
        if name.startswith("torch._decomp") and module is not None:
            functions += [v for v in list(vars(module).values()) if callable(v)]
    table = getattr(sys.modules.get("torch._decomp"), "decomposition_table", None)
    if isinstance(table, dict):
        functions += list(table.values())
    for function in functions:
        for _ in range(8):  # each decorator's __wrapped__, down to the formula
            code = getattr(function, "__code__", None)
            if isinstance(code, types.CodeType) and _formula_name(code.co_name):
                found[code] = f"torch._decomp's {code.co_name}"
            function = getattr(function, "__wrapped__", None)
            if function is None:
                break
    _FORMULAS.clear()
    _FORMULAS.update(found)
    _FORMULAS_FOUND[:] = [True]
    _FRAME_KINDS.clear()


def _torch_formula_on_stack() -> str | None:
    """The torch formula (see :data:`_FORMULAS`) the op being dispatched runs in, if any.

    A formula is called by the learner's code, so it lies between the op and the
    learner's nearest frame: the walk looks at torch's (the standard library's, the
    watch's own) frames from the op outwards and stops at the first frame of other code.
    An op the learner's code calls itself costs a look or two."""
    if not _WALK:
        if not _FORMULAS_FOUND:
            find_torch_formulas()  # where no zygote found them first (a test in process)
        # The watch's own frames (its modes) lie between too: named after look_plain's
        # renaming, which the learner process has done before any call comes.
        _WALK.append((_watched.__code__.co_filename, (_TORCH_DIR, _STDLIB_DIR)))
    kinds = _FRAME_KINDS
    frame: types.FrameType | None = sys._getframe(3)  # past this, _see_op, __torch_dispatch__
    while frame is not None:
        code = frame.f_code
        try:
            kind = kinds[code]
        except KeyError:
            kind = kinds[code] = _frame_kind(code)
        if kind is not None:
            return kind or None  # a formula's name, or "" at the learner's code
        frame = frame.f_back
    return None


def _frame_kind(code: types.CodeType) -> str | None:
    """What a frame of ``code`` is to the walk: a torch formula (its name), the
    learner's code (""), or torch's, the standard library's or the watch's own (None:
    walk on). Only the code object tells (its identity, file and name)."""
    found = _FORMULAS.get(code)
    if found is not None:
        return found
    ours, prefixes = _WALK[0]
    filename = code.co_filename
    if filename != ours and not filename.startswith(prefixes):
        return ""  # the learner's code
    if filename.startswith(_DECOMP_DIR) and _formula_name(code.co_name):
        return f"torch._decomp's {code.co_name}"  # a module loaded after the zygote's look
    return None


# The walk's verdict on each code object met, kept: an op's walk costs a look per frame.
_FRAME_KINDS: dict[types.CodeType, str | None] = {}


def _formula_name(name: str) -> bool:
    """Whether a function of torch._decomp is named as a gradient formula is."""
    return "backward" in name or "jvp" in name


# What the walk compares frames with, once known: the watch's file, torch's and the
# standard library's folders.
_WALK: list[tuple[str, tuple[str, str]]] = []


def _forward_level_open() -> bool:
    """Whether a forward-mode AD level is open (torch supports one at a time)."""
    try:
        level = torch._C._enter_dual_level()
    except RuntimeError:
        return True
    torch._C._exit_dual_level(level)
    return False


def _names_a_kernel(func: torch._ops.OpOverload) -> bool:
    if not isinstance(func, torch._ops.OpOverload):
        return False  # a higher-order op such as torch.cond: its body's ops are seen
    name = func._schema.name.split("::")[-1]
    return "backward" in name or name in EXTRA_KERNELS


_is_kernel = numeric.per_op(_names_a_kernel)


def _function_mode_stack() -> list[Any]:
    return [torch._C._get_function_stack_at(i) for i in range(torch._C._len_torch_function_stack())]


def _pop_function_mode() -> Any:
    return torch._C._pop_torch_function_stack()


def _push_function_mode(mode: Any) -> None:
    torch._C._push_on_torch_function_stack(mode)


def _remove_function_mode(mode: Any) -> bool:
    """Take ``mode`` off the torch-function mode stack, wherever it is; False when it is
    not there."""
    depth = torch._C._len_torch_function_stack()
    if depth and torch._C._get_function_stack_at(depth - 1) is mode:
        _pop_function_mode()  # on top, as it almost always is
        return True
    if not any(m is mode for m in _function_mode_stack()):
        return False
    above = []
    while _function_mode_stack()[-1] is not mode:
        above.append(_pop_function_mode())
    _pop_function_mode()
    for other in reversed(above):
        _push_function_mode(other)
    return True


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
            if torchs(module) and not module.startswith(_PLUMBING):
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

    def timed(run: Callable[[], None]) -> float:
        # CPU time of this process: the machine's other load does not count.
        best = float("inf")
        for _ in range(7):
            started = time.process_time()
            for _ in range(2000):
                run()
            best = min(best, (time.process_time() - started) / 2000)
        return best * 1e6

    for name, run in (("direct backward call", direct), ("forward + engine backward", engine)):
        print(f"{name}, unwatched: {timed(run):.1f} µs")
    watch = DerivationWatch()
    watch.start()  # as in the learner's process: one watch for the whole check
    watch.adopt(Sigmoid)
    for name, run in (("direct backward call", direct), ("forward + engine backward", engine)):
        print(f"{name}, watched: {timed(run):.1f} µs")
    with watch.counted() as own_pass:

        def counted() -> None:
            own_pass()
            engine()

        print(f"forward + engine backward, watched in a counted stretch: {timed(counted):.1f} µs")
    watch.stop()


if __name__ == "__main__":  # pragma: no cover
    _measure()


# What the learner's process runs the watch with, patched, would blind it: the guard
# keeps these classes' namespaces as it keeps torch's, and names a replaced method.
guard.also_guard(DerivationWatch, _Bracket, _OpWatch, _CompiledOpWatch, _FunctionWatch)


# torch's switches that take a Python mode out of play for a block: under one, an op
# reaches its kernel unseen (a backward kernel, forward-mode AD) while the watch's
# modes still sit on their stacks, so no tampering shows at the call's end. Used by
# the learner's code, each is a finding of its own; torch's own uses (printing a
# tensor, say) and ours are not.
_MODE_SWITCHES = (
    ("torch._C", "_DisableTorchDispatch"),
    ("torch._C", "DisableTorchFunction"),
    ("torch._C", "DisableTorchFunctionSubclass"),
    ("torch._C", "_ExcludeDispatchKeyGuard"),
    ("torch._C", "ExcludeDispatchKeyGuard"),
    ("torch._C", "_SetExcludeDispatchKeyGuard"),
    ("torch._C", "_ForceDispatchKeyGuard"),
    ("torch._C", "_dispatch_tls_set_dispatch_key_excluded"),
    ("torch._C", "_DisablePythonDispatcher"),
    ("torch._C", "_unset_dispatch_mode"),
    ("torch._C", "_pop_torch_dispatch_stack"),
    ("torch._C", "_pop_torch_function_stack"),
    ("torch.utils._python_dispatch", "_disable_current_modes"),
    ("torch.utils._python_dispatch", "_pop_mode"),
    ("torch.utils._python_dispatch", "_pop_mode_temporarily"),
    ("torch.overrides", "_pop_mode"),
    ("torch.overrides", "_pop_mode_temporarily"),
)
_WATCHES: list[DerivationWatch] = []  # the process's watches, once started
_OUR_CODES: set[int] = set()  # ids of our code objects (kept alive by their functions)


def watch_mode_switches(our_functions: Sequence[types.FunctionType]) -> None:
    """In the zygote, before the guard's snapshot: put a reporting wrapper in place of
    each mode switch, wherever a torch module binds it (``from torch._C import ...``
    made copies). ``our_functions``: the trainer's, whose calls are not reported."""
    for function in our_functions:
        _add_code_ids(function.__code__)
    replaced: dict[int, object] = {}
    for module_name, name in _MODE_SWITCHES:
        module = sys.modules.get(module_name)
        original = getattr(module, name, None)
        if original is None or id(original) in replaced:
            continue
        replaced[id(original)] = _reported(original, f"{module_name}.{name}")
    for module_name, module in list(sys.modules.items()):
        if module is None or not torchs(module_name):
            continue
        namespace = vars(module)
        for key, value in list(namespace.items()):
            wrapper = replaced.get(id(value))
            if wrapper is not None:
                namespace[key] = wrapper


def _add_code_ids(code: types.CodeType) -> None:
    _OUR_CODES.add(id(code))
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _add_code_ids(const)


def _reported(original: Any, public: str) -> Callable[..., Any]:
    def switch(*args: Any, **kwargs: Any) -> Any:
        caller = sys._getframe(1).f_code
        if (
            _WATCHES
            and id(caller) not in _OUR_CODES
            and not caller.co_filename.startswith((_TORCH_DIR, _STDLIB_DIR))
        ):
            for watch in _WATCHES:
                watch._tamper(f"was switched off with {public}")
        return original(*args, **kwargs)

    return switch
