"""A backward that lets torch derive the gradient is noticed; one that derives it is not.

Every cheat below computes the right gradient of the sigmoid, so only the watch
can tell it from an honest backward. Each runs two ways: the backward called
directly with the ctx of a real forward (as the learner's process does), and
driven by the autograd engine with the watch around forward and backward.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import math
import textwrap
import threading
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.grad
from torch import Tensor
from torch.autograd import forward_ad as fwAD
from torch.overrides import _get_current_function_mode_stack
from torch.utils._python_dispatch import (
    _disable_current_modes,
    _get_current_dispatch_mode_stack,
    _pop_mode,
)

from trainer.checking.learner.derivation import DerivationFinding, DerivationWatch, explain
from trainer.spec import Exercise, TensorParam, load_exercise

REPO = Path(__file__).resolve().parent.parent

# torch's forward-mode AD warns about itself the first time it is used.
pytestmark = pytest.mark.filterwarnings(
    "ignore:`torch.jit.script` is deprecated:DeprecationWarning"
)

Backward = Callable[[Tensor, Tensor], Any]
FunctionClass = type[torch.autograd.Function]


def apply(function: FunctionClass, *args: Any) -> Any:
    return function.apply(*args)  # type: ignore[no-untyped-call]


def sigmoid_function(backward: Backward) -> FunctionClass:
    """A sigmoid Function whose backward is ``backward(x, grad_output)``."""

    class Sigmoid(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Tensor) -> Tensor:
            ctx.save_for_backward(x)
            return torch.sigmoid(x)

        @staticmethod
        def backward(ctx: Any, grad_output: Tensor) -> Any:
            (x,) = ctx.saved_tensors
            return backward(x, grad_output)

    return Sigmoid


def run(function: FunctionClass, style: str) -> list[DerivationFinding]:
    """Call the Function's backward under a watch; check its gradient; return the findings."""
    x = torch.linspace(-3, 3, 7, dtype=torch.float64, requires_grad=True)
    grad_output = torch.linspace(-1, 1, 7, dtype=torch.float64)
    if style == "direct":
        # What a direct call needs: the ctx (grad_fn) of a real forward, kept alive.
        output = apply(function, x)
        with DerivationWatch(function) as watch:
            result = function.backward(output.grad_fn, grad_output)
        grad = result[0] if isinstance(result, tuple) else result
        assert watch.calls == {"backward": 1}
    else:
        with DerivationWatch(function) as watch:
            (grad,) = torch.autograd.grad(apply(function, x), x, grad_output)
        assert watch.calls["backward"] == 1
    s = torch.sigmoid(x.detach())
    torch.testing.assert_close(grad, grad_output * s * (1 - s))
    return watch.findings


def calls(findings: list[DerivationFinding]) -> list[tuple[str, str]]:
    return [(f.kind, f.call) for f in findings]


@pytest.fixture(params=["direct", "engine"])
def style(request: pytest.FixtureRequest) -> str:
    return str(request.param)


# Honest backwards ---------------------------------------------------------------


def local_slope(s: Tensor) -> Tensor:
    return s * (1 - s)


def honest_formula(x: Tensor, g: Tensor) -> Tensor:
    s = torch.sigmoid(x)
    return g * s * (1 - s)


def printing_tensors(x: Tensor, g: Tensor) -> Tensor:
    with torch.enable_grad():  # a tensor with a grad_fn, which its repr shows
        s = torch.sigmoid(x.detach().requires_grad_())
    print(repr(s), str(g), f"{s}")
    return g * local_slope(s.detach())


def enable_grad_without_running_it(x: Tensor, g: Tensor) -> Tensor:
    with torch.enable_grad():
        leaf = x.detach().requires_grad_()
        s = torch.sigmoid(leaf)
    return g * local_slope(s.detach())


class HandWrittenSlope(torch.autograd.Function):
    """A helper Function with its own hand-written backward."""

    @staticmethod
    def forward(ctx: Any, s: Tensor) -> Tensor:
        return s * (1 - s)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        raise AssertionError("never run inside the learner's backward")


def scaled_by_a_weight_equal_to_one_over_eps(x: Tensor, g: Tensor) -> Tensor:
    """A norm's affine step, a channel at a time: ``xhat * weight[c]`` where the
    weight (data, 0-dim) is 1000 and eps 1e-3. Multiplying by 1000 is dividing by
    the "step", but the weight is no number written in the code."""
    s = torch.sigmoid(x)
    centred = s - s.mean()
    xhat = centred / torch.sqrt((centred * centred).mean() + 1e-3)  # var + eps: a copy
    weight = torch.full((3,), 1000.0, dtype=x.dtype)
    scaled = (xhat - centred) * weight[0]
    return g * local_slope(s) + 0 * scaled


def divided_by_a_zero_norm_plus_eps(x: Tensor, g: Tensor) -> Tensor:
    """The epsilon guard ``/ (norm + eps)`` on a zero row: the divisor is exactly eps,
    the "step", but computed from the data."""
    s = torch.sigmoid(x)
    norm = torch.zeros_like(x).norm()
    guarded: Tensor = (s - (s + 1e-12)) / (norm + 1e-12)
    return g * local_slope(s) + 0 * guarded


def a_number_equal_to_one_over_eps_scaling_no_difference(x: Tensor, g: Tensor) -> Tensor:
    """``log(s + 1e-3)`` and ``s * 1000``: a copy and a number that divides by its step,
    but what is scaled is not a difference made from the copy."""
    s = torch.sigmoid(x)
    logged = torch.log(s + 1e-3)
    scaled: Tensor = logged + s * 1000.0
    return g * local_slope(s) + 0 * scaled


def opposite_epsilons_on_two_freed_views(x: Tensor, g: Tensor) -> Tensor:
    """``low[0] += eps`` and ``high[-1] -= eps`` on two copies, each through a view
    freed at once: the second view usually gets the first one's id, which must not
    make them one tensor perturbed by two steps."""
    low, high = x.detach().clone(), x.detach().clone()
    low[0] += 1e-6
    high[-1] -= 1e-6
    s = torch.sigmoid(x)
    return g * local_slope(s) + 0 * (high - low)


HONEST: dict[str, Backward] = {
    "a plain formula": honest_formula,
    "a helper function": lambda x, g: g * local_slope(torch.sigmoid(x)),
    "exp and division": lambda x, g: g * torch.exp(-x) / (1 + torch.exp(-x)) ** 2,
    "torch.where and einsum": lambda x, g: torch.where(
        x > 50, torch.zeros_like(g), torch.einsum("i,i->i", g, local_slope(torch.sigmoid(x)))
    ),
    "matmul with a diagonal": lambda x, g: g @ torch.diag(local_slope(torch.sigmoid(x))),
    "in-place ops on clones": lambda x, g: g.clone().mul_(
        torch.sigmoid(x).clone().mul_(1 - torch.sigmoid(x))
    ),
    "softmax of a pair": lambda x, g: (
        g * torch.softmax(torch.stack([x, torch.zeros_like(x)]), 0).prod(0)
    ),
    "torch.func.vmap as a loop": lambda x, g: torch.func.vmap(honest_formula)(x, g),
    "printing tensors, one with a grad_fn": printing_tensors,
    "an enable_grad block that builds a graph and never runs it": enable_grad_without_running_it,
    "the apply of another custom Function": lambda x, g: (
        g * apply(HandWrittenSlope, torch.sigmoid(x))
    ),
    # An epsilon is a small number added to a tensor, as a step is: only a difference
    # made from it and divided by a number written in the code is a finite difference.
    "a 0-dim weight equal to 1/eps (data, not a step)": scaled_by_a_weight_equal_to_one_over_eps,
    "dividing by a zero norm plus eps (data, not a step)": divided_by_a_zero_norm_plus_eps,
    "1/eps scaling what is no difference": a_number_equal_to_one_over_eps_scaling_no_difference,
    "opposite epsilons on two views, the first freed": opposite_epsilons_on_two_freed_views,
}


@pytest.mark.parametrize("backward", HONEST.values(), ids=HONEST.keys())
def test_a_backward_that_derives_the_gradient_is_not_flagged(
    backward: Backward, style: str
) -> None:
    assert run(sigmoid_function(backward), style) == []


def test_a_backward_run_with_create_graph_for_double_backward_is_not_flagged() -> None:
    function = sigmoid_function(honest_formula)
    x = torch.linspace(-3, 3, 7, dtype=torch.float64, requires_grad=True)
    g = torch.linspace(-1, 1, 7, dtype=torch.float64)
    with DerivationWatch(function) as watch:
        (grad,) = torch.autograd.grad(apply(function, x), x, g, create_graph=True)
        # The second pass runs the graph the learner's ops recorded: the
        # caller's pass, outside the learner's methods.
        (second,) = torch.autograd.grad(grad.sum(), x)
    assert grad.requires_grad and second.shape == x.shape
    assert watch.findings == []
    assert watch.calls == {"forward": 1, "backward": 1}


def test_torch_machinery_used_by_the_caller_around_the_methods_is_not_flagged() -> None:
    function = sigmoid_function(honest_formula)
    x = torch.linspace(-3, 3, 7, dtype=torch.float64, requires_grad=True)
    with DerivationWatch(function) as watch:
        apply(function, x).sum().backward()
        torch.ops.aten.sigmoid_backward(torch.ones_like(x), torch.sigmoid(x.detach()))
        torch.func.jacrev(torch.sigmoid)(x.detach())
        torch.func.jvp(torch.sigmoid, (x.detach(),), (torch.ones_like(x),))
    assert watch.findings == []
    assert watch.calls == {"forward": 1, "backward": 1}


def test_a_mode_the_backward_leaves_behind_is_not_tampering() -> None:
    def backward(x: Tensor, g: Tensor) -> Tensor:
        torch.set_default_device("cpu")  # pushes a torch-function mode for good
        return honest_formula(x, g)

    try:
        assert run(sigmoid_function(backward), "direct") == []
        assert [type(m).__name__ for m in _get_current_function_mode_stack()] == [  # type: ignore[no-untyped-call]
            "DeviceContext"
        ]
    finally:
        torch.set_default_device(None)


# Cheating backwards -------------------------------------------------------------


def autograd_grad_on_a_rerun_forward(x: Tensor, g: Tensor) -> Tensor:
    with torch.enable_grad():
        leaf = x.detach().requires_grad_()
        return torch.autograd.grad(torch.sigmoid(leaf), leaf, g)[0]


def tensor_backward_on_a_rerun_forward(x: Tensor, g: Tensor) -> Tensor | None:
    with torch.enable_grad():
        leaf = x.detach().requires_grad_()
        torch.sigmoid(leaf).backward(g)  # type: ignore[no-untyped-call]
    return leaf.grad


def autograd_backward_on_a_rerun_forward(x: Tensor, g: Tensor) -> Tensor | None:
    with torch.enable_grad():
        leaf = x.detach().requires_grad_()
        torch.autograd.backward(torch.sigmoid(leaf), g)
    return leaf.grad


def func_vjp(x: Tensor, g: Tensor) -> Tensor:
    _, vjp_fn = torch.func.vjp(torch.sigmoid, x)[:2]
    return vjp_fn(g)[0]  # type: ignore[no-any-return]


def func_grad(x: Tensor, g: Tensor) -> Tensor:
    return torch.func.grad(lambda t: (torch.sigmoid(t) * g).sum())(x)  # type: ignore[no-any-return]


def func_grad_under_vmap(x: Tensor, g: Tensor) -> Tensor:
    return torch.func.vmap(torch.func.grad(torch.sigmoid))(x) * g  # type: ignore[no-any-return]


def jacrev(x: Tensor, g: Tensor) -> Tensor:
    return g @ torch.func.jacrev(torch.sigmoid)(x)  # type: ignore[no-any-return]


def jacfwd(x: Tensor, g: Tensor) -> Tensor:
    return g @ torch.func.jacfwd(torch.sigmoid)(x)  # type: ignore[no-any-return]


def func_jvp(x: Tensor, g: Tensor) -> Tensor:
    return torch.func.jvp(torch.sigmoid, (x,), (g,))[1]  # type: ignore[no-any-return]


def dual_tensors(x: Tensor, g: Tensor) -> Tensor:
    with fwAD.dual_level():
        dual = fwAD.make_dual(x, g)  # type: ignore[no-untyped-call]
        return fwAD.unpack_dual(torch.sigmoid(dual)).tangent  # type: ignore[no-untyped-call, no-any-return]


def functional_jacobian(x: Tensor, g: Tensor) -> Tensor:
    return g @ torch.autograd.functional.jacobian(torch.sigmoid, x)  # type: ignore[no-untyped-call, no-any-return]


def sigmoid_backward_kernel(x: Tensor, g: Tensor) -> Tensor:
    return torch.ops.aten.sigmoid_backward(g, torch.sigmoid(x))  # type: ignore[no-any-return]


def softmax_backward_data(x: Tensor, g: Tensor) -> Tensor:
    # softmax over the pair (x, 0) is (sigmoid(x), 1 - sigmoid(x)).
    pair = torch.stack([x, torch.zeros_like(x)])
    upstream = torch.stack([g, torch.zeros_like(g)])
    return torch._softmax_backward_data(upstream, torch.softmax(pair, 0), 0, x.dtype)[0]


def conv_grad_helper(x: Tensor, g: Tensor) -> Tensor:
    # A 1-wide convolution by 1 has the identity as its input gradient.
    grad_input: Tensor = torch.nn.grad.conv1d_input(  # type: ignore[no-untyped-call]
        [1, 1, x.numel()], torch.ones(1, 1, 1, dtype=x.dtype), g.view(1, 1, -1)
    )
    return grad_input.view(-1) * local_slope(torch.sigmoid(x))


def calling_a_recorded_node(x: Tensor, g: Tensor) -> Any:
    # A MulBackward0 node: its formula is a plain mul, no backward kernel.
    with torch.enable_grad():
        leaf = x.detach().requires_grad_()
        node = (leaf * local_slope(torch.sigmoid(x))).grad_fn
    assert node is not None
    return node(g)  # type: ignore[operator]


def a_pass_with_the_watch_switched_off(x: Tensor, g: Tensor) -> Tensor:
    with _disable_current_modes():
        return autograd_grad_on_a_rerun_forward(x, g)


def a_pass_in_another_thread(x: Tensor, g: Tensor) -> Tensor:
    results = []
    thread = threading.Thread(target=lambda: results.append(autograd_grad_on_a_rerun_forward(x, g)))
    thread.start()
    thread.join()
    return results[0]


CHEATS: dict[str, tuple[Backward, str, str]] = {
    "torch.autograd.grad on a re-run forward": (
        autograd_grad_on_a_rerun_forward,
        "engine",
        "torch.autograd.grad",
    ),
    "Tensor.backward on a re-run forward": (
        tensor_backward_on_a_rerun_forward,
        "engine",
        "Tensor.backward",
    ),
    "torch.autograd.backward on a re-run forward": (
        autograd_backward_on_a_rerun_forward,
        "engine",
        "torch.autograd.backward",
    ),
    "torch.func.vjp": (func_vjp, "engine", "torch.func.vjp"),
    "torch.func.grad": (func_grad, "engine", "torch.func.grad"),
    "torch.func.grad under vmap": (func_grad_under_vmap, "engine", "torch.func.grad"),
    "torch.func.jacrev": (jacrev, "engine", "torch.func.jacrev"),
    "torch.autograd.functional.jacobian": (
        functional_jacobian,
        "engine",
        "torch.autograd.functional.jacobian",
    ),
    "torch.func.jacfwd": (jacfwd, "forward_ad", "torch.func.jacfwd"),
    "torch.func.jvp": (func_jvp, "forward_ad", "torch.func.jvp"),
    "forward-mode dual tensors": (
        dual_tensors,
        "forward_ad",
        "torch.autograd.forward_ad.make_dual",
    ),
    "aten.sigmoid_backward": (sigmoid_backward_kernel, "kernel", "aten.sigmoid_backward"),
    "torch._softmax_backward_data": (
        softmax_backward_data,
        "kernel",
        "aten._softmax_backward_data",
    ),
    "torch.nn.grad.conv1d_input": (conv_grad_helper, "kernel", "torch.nn.grad.conv1d_input"),
    "a backward pass with the watch switched off": (
        a_pass_with_the_watch_switched_off,
        "engine",
        "autograd backward pass",
    ),
    "a backward pass in another thread": (
        a_pass_in_another_thread,
        "engine",
        "autograd backward pass",
    ),
}


@pytest.mark.parametrize(("backward", "kind", "call"), CHEATS.values(), ids=CHEATS.keys())
def test_a_backward_that_lets_torch_derive_the_gradient_is_flagged_with_the_call_it_used(
    backward: Backward, kind: str, call: str, style: str
) -> None:
    findings = run(sigmoid_function(backward), style)
    assert calls(findings)[0] == (kind, call), findings
    assert all(f.method == "backward" for f in findings)


def test_a_node_of_a_recorded_graph_called_by_hand_is_flagged() -> None:
    # Only outside the engine: inside it, a node of another graph computes nothing.
    assert calls(run(sigmoid_function(calling_a_recorded_node), "direct")) == [
        ("graph", "Tensor.grad_fn")
    ]


def test_a_graph_recorded_in_forward_and_run_in_backward_is_flagged(style: str) -> None:
    class Sigmoid(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Tensor) -> Tensor:
            with torch.enable_grad():
                ctx.leaf = x.detach().requires_grad_()
                ctx.out = torch.sigmoid(ctx.leaf)
            return ctx.out.detach()  # type: ignore[no-any-return]

        @staticmethod
        def backward(ctx: Any, g: Tensor) -> Tensor:
            return torch.autograd.grad(ctx.out, ctx.leaf, g)[0]  # type: ignore[no-any-return]

    assert calls(run(Sigmoid, style)) == [("engine", "torch.autograd.grad")]


def test_a_gradient_computed_in_a_watched_forward_is_flagged_there() -> None:
    class Sigmoid(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Tensor) -> Tensor:
            ctx.slope = autograd_grad_on_a_rerun_forward(x, torch.ones_like(x))
            return torch.sigmoid(x)

        @staticmethod
        def backward(ctx: Any, g: Tensor) -> Tensor:
            return g * ctx.slope  # type: ignore[no-any-return]

    findings = run(Sigmoid, "engine")
    assert [(f.kind, f.call, f.method) for f in findings] == [
        ("engine", "torch.autograd.grad", "forward")
    ]


def test_a_backward_written_as_vjp_and_a_setup_context_forward_are_watched() -> None:
    class Sigmoid(torch.autograd.Function):
        @staticmethod
        def forward(x: Tensor) -> Tensor:
            return torch.sigmoid(x)

        @staticmethod
        def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
            ctx.save_for_backward(inputs[0])

        @staticmethod
        def vjp(ctx: Any, g: Tensor) -> Tensor:
            (x,) = ctx.saved_tensors
            return sigmoid_backward_kernel(x, g)

    x = torch.linspace(-3, 3, 7, dtype=torch.float64, requires_grad=True)
    with DerivationWatch(Sigmoid) as watch:
        torch.autograd.grad(apply(Sigmoid, x), x, torch.ones_like(x))
    assert calls(watch.findings) == [("kernel", "aten.sigmoid_backward")]
    assert watch.calls == {"forward": 1, "setup_context": 1, "vjp": 1}


# The watch itself ---------------------------------------------------------------


def test_the_watch_leaves_the_class_and_torch_as_it_found_them() -> None:
    function = sigmoid_function(autograd_grad_on_a_rerun_forward)
    before = dict(vars(function))
    run(function, "engine")
    assert dict(vars(function)) == before
    assert _get_current_dispatch_mode_stack() == []
    assert _get_current_function_mode_stack() == []  # type: ignore[no-untyped-call]


def test_a_backward_that_puts_the_unwatched_method_back_is_reported() -> None:
    def backward(x: Tensor, g: Tensor) -> Tensor:
        unwatched = Sigmoid.backward.__wrapped__  # type: ignore[attr-defined]
        Sigmoid.backward = staticmethod(unwatched)  # type: ignore[method-assign]
        return honest_formula(x, g)

    Sigmoid = sigmoid_function(backward)
    assert calls(run(Sigmoid, "direct")) == [("tamper", "the derivation watch")]


def test_a_backward_that_removes_the_watch_is_reported_and_torch_is_left_usable() -> None:
    def backward(x: Tensor, g: Tensor) -> Tensor:
        _pop_mode()  # the watch's dispatch mode, the innermost one
        return honest_formula(x, g)

    assert calls(run(sigmoid_function(backward), "direct")) == [("tamper", "the derivation watch")]
    assert _get_current_dispatch_mode_stack() == []
    assert _get_current_function_mode_stack() == []  # type: ignore[no-untyped-call]


def test_a_backward_that_removes_the_torch_function_mode_is_reported() -> None:
    def backward(x: Tensor, g: Tensor) -> Tensor:
        torch._C._pop_torch_function_stack()  # the watch's mode, the only one
        return honest_formula(x, g)

    assert calls(run(sigmoid_function(backward), "direct")) == [("tamper", "the derivation watch")]
    assert _get_current_function_mode_stack() == []  # type: ignore[no-untyped-call]


def test_a_watch_watches_one_block() -> None:
    watch = DerivationWatch(sigmoid_function(honest_formula))
    with watch:
        pass
    with pytest.raises(RuntimeError, match="one block"), watch:
        pass


def test_the_explanation_names_the_call_and_asks_for_a_derivation() -> None:
    findings = run(sigmoid_function(func_vjp), "direct")
    message, details = explain(findings)
    assert "torch.func.vjp" in message
    assert "derive the gradient yourself" in message
    assert details[0].startswith("torch.func.vjp (in backward): ")
    assert "torch.func.vmap" in details[-1]


# Every reference solution -----------------------------------------------------------


def _reference_solutions() -> list[Path]:
    """Every solution whose answer is a Function class (this file watches classes in
    process; a custom op's watch is proven through the checker, in test_answer_forms),
    but the wrong variants that let torch derive on purpose (fails_at: by_hand)."""
    solutions = REPO / "solutions"
    found = sorted(solutions.glob("*.py")) + sorted((solutions / "wrong").glob("*/*.py"))
    return [p for p in found if _exercise(_exercise_id(p)).form == "function" and not _by_hand(p)]


def _by_hand(path: Path) -> bool:
    """A wrong variant declared to fail "derived by hand": it lets torch derive on purpose."""
    exercise = _exercise(_exercise_id(path))
    return (
        any(v.file == path.name and v.fails_at == "by_hand" for v in exercise.wrong_variants)
        and path.parent.name != "solutions"
    )


def _exercise_id(path: Path) -> str:
    return path.stem if path.parent.name == "solutions" else path.parent.name


@functools.cache
def _exercise(exercise_id: str) -> Exercise:
    """Read once for the module (700 tests share 37 specs); only read here, never changed."""
    return load_exercise(REPO / "exercises" / f"{exercise_id}.yaml")


def _load(path: Path) -> tuple[FunctionClass, list[Any]]:
    """The solution's Function class and arguments for the exercise's first case."""
    exercise_id = path.stem if path.parent.name == "solutions" else path.parent.name
    exercise = _exercise(exercise_id)
    spec = importlib.util.spec_from_file_location(f"reference_{exercise_id}_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.manual_seed(0)
    args: list[Any] = []
    for param in exercise.parameters:
        value: Any = exercise.cases[0].values[param.name]
        if isinstance(param, TensorParam) and param.is_float:
            tensor = torch.empty(value, dtype=torch.float64).uniform_(param.low, param.high)
            args.append(tensor.requires_grad_(param.requires_grad))
        elif isinstance(param, TensorParam):
            args.append(torch.randint(int(param.low), int(param.high), value))
        else:
            args.append(value)
    return getattr(module, exercise.class_name), args


@pytest.mark.parametrize(
    "path",
    _reference_solutions(),
    ids=[str(p.relative_to(REPO / "solutions")) for p in _reference_solutions()],
)
def test_no_reference_solution_right_or_wrong_is_flagged(path: Path, style: str) -> None:
    function, leaves = _load(path)
    inputs = [a for a in leaves if isinstance(a, Tensor) and a.requires_grad]
    # Called on activations, as the checker does: an in-place forward cannot modify a leaf.
    args = [a.clone() if isinstance(a, Tensor) and a.requires_grad else a for a in leaves]
    # Some wrong solutions fail in forward or backward: only what they use matters here.
    if style == "direct":
        try:
            outputs = apply(function, *args)
        except Exception:
            pytest.skip("this wrong solution fails in forward")
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        ctx = next((o.grad_fn for o in outputs if o.grad_fn is not None), None)
        if ctx is None:
            pytest.skip("this wrong solution's outputs are not connected to the graph")
        grads = [torch.ones_like(o) for o in outputs]
        with DerivationWatch(function) as watch, contextlib.suppress(Exception):
            function.backward(ctx, *grads)
        assert watch.calls == {"backward": 1}
    else:
        # Engine-driven, with create_graph as for a double backward.
        with DerivationWatch(function) as watch, contextlib.suppress(Exception):
            outputs = apply(function, *args)
            outputs = outputs if isinstance(outputs, tuple) else (outputs,)
            outputs = tuple(o for o in outputs if o.is_floating_point())  # indices take none
            grads = [torch.ones_like(o) for o in outputs]
            torch.autograd.grad(outputs, inputs, grads, create_graph=True, allow_unused=True)
        assert watch.calls.get("forward") == 1
        if path.parent.name == "solutions":  # a right solution: its backward ran too
            assert watch.calls.get("backward") == 1
    assert watch.findings == []


# The whole learner process: the import, every staticmethod, hold ----------------------------


def at_import(source: str) -> list[tuple[str, str, str]]:
    """Run ``source`` as the learner process imports a file: under a started watch."""
    watch = DerivationWatch()
    watch.start()
    try:
        with watch.importing():
            exec(compile(textwrap.dedent(source), "solution.py", "exec"), {})
    finally:
        watch.stop()
    return [(f.kind, f.call, f.method) for f in watch.findings]


SELF_TESTS_AT_IMPORT = """
    import torch

    class S(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return torch.sigmoid(x)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            s = torch.sigmoid(x)
            return g * s * (1 - s)

    x = torch.randn(5, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(S.apply, (x,))
    S.apply(x).sum().backward()
    expected = torch.autograd.grad(torch.sigmoid(x).sum(), x)[0]
    assert torch.allclose(x.grad, expected)
    print(S.apply(x).grad_fn)
"""


def test_autograd_used_eagerly_at_import_to_test_the_function_is_not_flagged() -> None:
    assert at_import(SELF_TESTS_AT_IMPORT) == []


def test_with_dynamo_loaded_first_an_eager_self_test_at_import_is_not_taken_for_a_tracer():
    """The watch's own frame around its mode (``_CompiledOpWatch``) is not another
    mode recording ops."""
    import torch._dynamo  # noqa: F401 - loaded before the watch, as a zygote may have

    assert at_import(SELF_TESTS_AT_IMPORT) == []


TRACERS_AT_IMPORT = {
    "make_fx": """
        import torch
        from torch.fx.experimental.proxy_tensor import make_fx

        def slope(x, g):
            return torch.autograd.grad(torch.sigmoid(x), x, g)[0]

        graph = make_fx(slope)(torch.zeros(3, requires_grad=True), torch.ones(3))
    """,
    "make_fx on fake tensors": """
        import torch
        from torch.fx.experimental.proxy_tensor import make_fx

        def slope(x, g):
            return torch.autograd.grad(torch.sigmoid(x), x, g)[0]

        graph = make_fx(slope, tracing_mode="fake")(torch.zeros(3, requires_grad=True), torch.ones(3))
    """,
    "a dispatch mode of the learner's that records the ops": """
        import torch
        from torch.utils._python_dispatch import TorchDispatchMode

        class Record(TorchDispatchMode):
            def __init__(self):
                super().__init__()
                self.ops = []

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                self.ops.append(func)
                return func(*args, **(kwargs or {}))

        x = torch.randn(3, requires_grad=True)
        with Record() as recorded:
            torch.autograd.grad(torch.sigmoid(x).sum(), x)
    """,
    "forward mode under make_fx": """
        import torch
        from torch.fx.experimental.proxy_tensor import make_fx

        graph = make_fx(lambda x, t: torch.func.jvp(torch.tanh, (x,), (t,))[1])(
            torch.zeros(3), torch.ones(3)
        )
    """,
}


@pytest.mark.parametrize("source", TRACERS_AT_IMPORT.values(), ids=TRACERS_AT_IMPORT.keys())
def test_a_gradient_traced_into_a_graph_at_import_is_flagged(source: str) -> None:
    findings = at_import(source)
    assert findings and {(kind, method) for kind, _, method in findings} == {("traced", "import")}


def test_every_staticmethod_of_the_class_is_watched_jvp_and_vmap_among_them() -> None:
    class Sigmoid(torch.autograd.Function):
        generate_vmap_rule = False

        @staticmethod
        def forward(x: Tensor) -> Tensor:
            return torch.sigmoid(x)

        @staticmethod
        def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
            ctx.save_for_backward(output)
            ctx.save_for_forward(output)

        @staticmethod
        def slope(y: Tensor) -> Tensor:
            return y * (1 - y)

        @staticmethod
        def backward(ctx: Any, g: Tensor) -> Tensor:
            (y,) = ctx.saved_tensors
            return g * Sigmoid.slope(y)

        @staticmethod
        def jvp(ctx: Any, t: Tensor) -> Tensor:
            (y,) = ctx.saved_tensors
            return torch.ops.aten.sigmoid_backward(t, y)  # type: ignore[no-any-return]

        @staticmethod
        def vmap(info: Any, in_dims: Any, x: Tensor) -> Any:
            return apply(Sigmoid, x.movedim(in_dims[0], 0)), 0

    x = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    with DerivationWatch(Sigmoid) as watch:
        torch.autograd.grad(torch.func.vmap(lambda t: apply(Sigmoid, t))(x).sum(), x)
        with watch.checkers_forward_ad():  # the checker's jvp, as its jvp request marks it
            torch.func.jvp(lambda t: apply(Sigmoid, t), (x.detach(),), (torch.ones_like(x),))
    assert {name for name in watch.calls} >= {"forward", "backward", "jvp", "vmap", "slope"}
    assert calls(watch.findings) == [("kernel", "aten.sigmoid_backward")]
    assert watch.findings[0].method == "jvp"


def test_torch_func_jvp_inside_a_jvp_staticmethod_is_flagged() -> None:
    class Square(torch.autograd.Function):
        @staticmethod
        def forward(x: Tensor) -> Tensor:
            return x * x

        @staticmethod
        def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
            ctx.save_for_forward(inputs[0])

        @staticmethod
        def backward(ctx: Any, g: Tensor) -> Tensor:
            raise AssertionError("not called")

        @staticmethod
        def jvp(ctx: Any, t: Tensor) -> Tensor:
            (x,) = ctx.saved_tensors
            # Only plain multiplications: no backward kernel to give it away.
            return torch.func.jvp(lambda a: a * a, (x,), (t,))[1]  # type: ignore[no-any-return]

    x = torch.randn(3, dtype=torch.float64)
    with DerivationWatch(Square) as watch, watch.checkers_forward_ad():
        tangent = torch.func.jvp(lambda a: apply(Square, a), (x,), (torch.ones_like(x),))[1]
    torch.testing.assert_close(tangent, 2 * x)
    assert [(f.kind, f.call, f.method) for f in watch.findings] == [
        ("forward_ad", "torch.func.jvp", "jvp")
    ]


def normalize_with_vmap_rule(rule: Callable[..., Any]) -> FunctionClass:
    class Normalize(torch.autograd.Function):
        @staticmethod
        def forward(x: Tensor) -> Tensor:
            return x / x.norm(dim=-1, keepdim=True)  # type: ignore[no-any-return]

        @staticmethod
        def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
            ctx.save_for_backward(inputs[0], output)

        @staticmethod
        def backward(ctx: Any, g: Tensor) -> Tensor:
            x, y = ctx.saved_tensors
            norm = x.norm(dim=-1, keepdim=True)
            return (g - y * (y * g).sum(-1, keepdim=True)) / norm  # type: ignore[no-any-return]

        @staticmethod
        def vmap(info: Any, in_dims: Any, x: Tensor) -> Any:
            return rule(Normalize, x.movedim(in_dims[0], 0)), 0

    return Normalize


VMAP_RULES: dict[str, tuple[Callable[..., Any], bool]] = {
    "plain ops": (lambda cls, x: x / x.norm(dim=-1, keepdim=True), True),
    "the Function times zero plus plain ops": (
        lambda cls, x: apply(cls, x) * 0 + x / x.norm(dim=-1, keepdim=True),
        True,
    ),
    "the Function on the whole batch": (lambda cls, x: apply(cls, x), False),
    "the Function in a loop over the batch": (
        lambda cls, x: torch.stack([apply(cls, row) for row in x.unbind(0)]),
        False,
    ),
}


@pytest.mark.parametrize(("rule", "bypasses"), VMAP_RULES.values(), ids=VMAP_RULES.keys())
def test_a_vmap_rule_whose_outputs_reach_its_inputs_past_the_function_is_flagged(
    rule: Callable[..., Any], bypasses: bool
) -> None:
    function = normalize_with_vmap_rule(rule)
    x = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    with DerivationWatch(function) as watch:
        out = torch.func.vmap(lambda t: apply(function, t))(x)
        torch.autograd.grad(out.sum(), x)
    assert [f.kind for f in watch.findings] == (["bypass"] if bypasses else [])


# Numeric and symbolic differentiation -----------------------------------------------------


def sigmoid64(x: Tensor) -> Tensor:
    return torch.sigmoid(x.double())


def central_differences(x: Tensor, g: Tensor) -> Tensor:
    h = 1e-6
    return g * (sigmoid64(x + h) - sigmoid64(x - h)) / (2 * h)


def forward_differences(x: Tensor, g: Tensor) -> Tensor:
    h = 1e-7
    return g * (sigmoid64(x + h) - sigmoid64(x)) / h


def element_by_element(x: Tensor, g: Tensor) -> Tensor:
    slope = torch.empty_like(x)
    h = 1e-6
    for i in range(x.numel()):
        up, down = x.clone(), x.clone()
        up[i] += h
        down[i] -= h
        slope[i] = (torch.sigmoid(up)[i] - torch.sigmoid(down)[i]) / (2 * h)
    return g * slope


def element_by_element_forward(x: Tensor, g: Tensor) -> Tensor:
    # One step per element, always +h: only the quotient can show it, and only if
    # x[i] += h is seen to perturb the copy the index is a view of.
    slope = torch.empty_like(x)
    h = 1e-6
    at_x = torch.sigmoid(x)
    for i in range(x.numel()):
        up = x.clone()
        up[i] += h
        slope[i] = (torch.sigmoid(up)[i] - at_x[i]) / h
    return g * slope


def element_written_back(x: Tensor, g: Tensor) -> Tensor:
    slope = torch.empty_like(x)
    h = 1e-6
    at_x = torch.sigmoid(x)
    for i in range(x.numel()):
        up = x.clone()
        up[i] = up[i] + h
        slope[i] = (torch.sigmoid(up)[i] - at_x[i]) / h
    return g * slope


def complex_step(x: Tensor, g: Tensor) -> Tensor:
    h = 1e-20
    return g * torch.sigmoid(torch.complex(x, torch.full_like(x, h))).imag / h


def forward_differences_with_a_tensor_step(x: Tensor, g: Tensor) -> Tensor:
    h = torch.tensor(1e-7, dtype=torch.float64)
    return g * (sigmoid64(x + h) - sigmoid64(x)) / (2 * h) * 2


NUMERIC: dict[str, tuple[Backward, str]] = {
    "central differences": (central_differences, "finite differences"),
    "forward differences": (forward_differences, "finite differences"),
    "a step kept as a tensor": (forward_differences_with_a_tensor_step, "finite differences"),
    "one element at a time": (element_by_element, "finite differences"),
    "one element at a time, forward": (element_by_element_forward, "finite differences"),
    "one element written back": (element_written_back, "finite differences"),
    "the complex step": (complex_step, "complex step"),
}


@pytest.mark.parametrize(("backward", "call"), NUMERIC.values(), ids=NUMERIC.keys())
def test_numeric_differentiation_in_backward_is_flagged(
    backward: Backward, call: str, style: str
) -> None:
    findings = run(sigmoid_function(backward), style)
    assert calls(findings) == [("numeric", call)]
    message, _ = explain(findings)
    assert "approximates the gradient numerically" in message


def test_forward_called_on_a_perturbed_copy_in_backward_is_flagged() -> None:
    class Sigmoid(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Tensor) -> Tensor:
            ctx.save_for_backward(x)
            return torch.sigmoid(x)

        @staticmethod
        def backward(ctx: Any, g: Tensor) -> Tensor:
            (x,) = ctx.saved_tensors
            h = 1e-6
            up = Sigmoid.forward(ctx, x + h)
            # The quotient by a tensor of 1/h: only the call of forward gives it away.
            return g * (up - torch.sigmoid(x)) * torch.full_like(x, 1 / h)

    x = torch.linspace(-3, 3, 7, dtype=torch.float64, requires_grad=True)
    with DerivationWatch(Sigmoid) as watch:
        torch.autograd.grad(apply(Sigmoid, x).sum(), x)
    assert calls(watch.findings) == [("numeric", "finite differences")]
    assert "calls forward on a perturbed copy" in watch.findings[0].detail


RECOMPUTING: dict[str, Backward] = {
    "recomputes the forward's function on the saved input": lambda x, g: (
        g * torch.sigmoid(x) * (1 - torch.sigmoid(x))
    ),
    "an epsilon guard, added twice": lambda x, g: (
        honest_formula(x, g) * ((torch.sigmoid(x) + 1e-12) / (torch.sigmoid(x) + 1e-12))
    ),
    "a step-like constant that divides nothing": lambda x, g: honest_formula(x, g) + (x + 1e-3) * 0,
}


@pytest.mark.parametrize("backward", RECOMPUTING.values(), ids=RECOMPUTING.keys())
def test_a_backward_that_recomputes_forward_quantities_is_not_flagged(
    backward: Backward, style: str
) -> None:
    assert run(sigmoid_function(backward), style) == []


SYMPY_SOURCES = {
    "import sympy": "import sympy\n",
    "from sympy import diff": "from sympy import diff\n",
    "importlib": "import importlib\nsp = importlib.import_module('sympy')\n",
    "an attribute": "import torch\nsp = torch.utils._sympy.sympy\n",
}


@pytest.mark.parametrize("source", SYMPY_SOURCES.values(), ids=SYMPY_SOURCES.keys())
def test_sympy_named_in_the_source_is_symbolic_differentiation(source: str) -> None:
    watch = DerivationWatch()
    watch.see_source(source, None)
    assert [(f.kind, f.call, f.method) for f in watch.findings] == [("symbolic", "sympy", "import")]
    assert "lets sympy derive the gradient" in explain(watch.findings)[0]


def test_a_sympy_object_held_by_the_module_is_symbolic_differentiation() -> None:
    import sympy  # type: ignore[import-untyped]

    module = types.ModuleType("solution")
    module.derivative = sympy.diff(sympy.Symbol("t") ** 2)  # type: ignore[attr-defined]
    watch = DerivationWatch()
    watch.see_source("import torch\n", module)
    assert calls(watch.findings) == [("symbolic", "sympy")]
    watch = DerivationWatch()
    watch.see_source("import torch  # no sympy here, says the comment\n", types.ModuleType("m"))
    assert watch.findings == []


def test_hold_puts_back_a_wrapper_the_learner_removed_and_reports_it() -> None:
    function = sigmoid_function(honest_formula)
    watch = DerivationWatch()
    watch.start()
    try:
        watch.adopt(function)
        assert _get_current_dispatch_mode_stack() == []  # the modes are on during calls only
        function.backward = staticmethod(function.backward.__wrapped__)  # type: ignore[attr-defined, method-assign]
        watch.hold()
        assert [f.detail for f in watch.findings] == [
            "the watch on your code lost its hold on backward"
        ]
        assert hasattr(function.backward, "__wrapped__")
        run_under = sigmoid_function(sigmoid_backward_kernel)
        watch.adopt(run_under)
        x = torch.linspace(-3, 3, 7, dtype=torch.float64, requires_grad=True)
        torch.autograd.grad(apply(run_under, x).sum(), x)
        assert ("kernel", "aten.sigmoid_backward") in calls(watch.findings)
    finally:
        watch.stop()
    assert _get_current_dispatch_mode_stack() == []


def slope_function(slope: Callable[[Tensor], Tensor]) -> FunctionClass:
    """A sigmoid Function whose forward works out the slope (``slope(x)``) and saves it."""

    class Sigmoid(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Tensor) -> Tensor:
            ctx.save_for_backward(slope(x))
            return torch.sigmoid(x)

        @staticmethod
        def backward(ctx: Any, grad_output: Tensor) -> Tensor:
            saved: Tensor = ctx.saved_tensors[0]
            return grad_output * saved

    return Sigmoid


def stepped_by_a_complex_number(x: Tensor) -> Tensor:
    return torch.sigmoid(x.to(torch.complex128) + 1e-30j).imag * 1e30


def stepped_by_torch_complex(x: Tensor) -> Tensor:
    return torch.sigmoid(torch.complex(x, torch.full_like(x, 1e-30))).imag * 1e30


def stepped_through_view_as_complex(x: Tensor) -> Tensor:
    pairs = torch.stack([x, torch.full_like(x, 1e-20)], dim=-1)
    return torch.sigmoid(torch.view_as_complex(pairs)).imag * 1e20


def stepped_by_a_rotation(x: Tensor) -> Tensor:
    shifted = x + 5  # no zero: the step is a fraction of it
    turned = shifted.to(torch.complex128) * complex(math.cos(1e-20), math.sin(1e-20))
    return torch.sigmoid(turned - 5).imag / (shifted * 1e-20)


@pytest.mark.parametrize(
    "slope",
    [
        stepped_by_a_complex_number,
        stepped_by_torch_complex,
        stepped_through_view_as_complex,
        stepped_by_a_rotation,
    ],
    ids=["x + 1e-30j", "complex()", "view_as_complex", "x * exp(ih)"],
)
def test_the_complex_step_taken_in_forward_and_saved_for_backward_is_flagged(slope):
    """Complex arithmetic is allowed in forward (an FFT), but not a small imaginary step
    off the real line. Drop ``numeric.off_the_real_line`` and these pass unseen."""
    findings = run(slope_function(slope), "engine")
    assert calls(findings) == [("numeric", "complex step")]
    assert findings[0].method == "forward"


def test_complex_arithmetic_in_forward_without_a_step_is_not_flagged():
    def through_an_fft(x: Tensor) -> Tensor:
        same = torch.fft.irfft(torch.fft.rfft(x), n=x.numel())  # x, through the frequencies
        s = torch.sigmoid(same)
        return s * (1 - s)

    assert run(slope_function(through_an_fft), "engine") == []


def _kernel_through_compile(grad: Tensor, y: Tensor) -> Tensor:
    result: Tensor = torch.ops.aten.sigmoid_backward(grad * 1.0, y)
    return result


class _CompiledKernel(torch.autograd.Function):
    """Calls torch's sigmoid kernel from a function torch.compile runs in backward."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        y = torch.sigmoid(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        compiled = torch.compile(_kernel_through_compile, backend="eager")
        return compiled(grad, y)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_with_dynamo_loaded_first_a_backward_kernel_called_from_compiled_code_is_seen():
    """The watch keeps its dispatch mode out of torch.compile's traces once
    torch._dynamo is loaded as it starts (the zygote loads it for jvp, vmap and
    opcheck stages): the compiled function's ops still pass through it."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    with DerivationWatch(_CompiledKernel) as watch:
        x = torch.randn(5, requires_grad=True)
        apply(_CompiledKernel, x).sum().backward()
    assert [(f.kind, f.call) for f in watch.findings] == [("kernel", "aten.sigmoid_backward")]
    # Not one frame compiled: the mode's own is one dynamo skips, and under the mode
    # the learner's function runs as it is.
    assert counters["frames"].get("total", 0) == 0
