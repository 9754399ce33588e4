"""Verdict truth, round five: what a red team found passing. Each file is one a
learner writes, in our own words; each test names the guard it proves."""

from __future__ import annotations

import pytest

from tests.conftest import CATALOG, REPO
from tests.test_truth import (
    RIGHT_BACKWARD,
    SAVES_OUTPUT,
    check,
    first_failure,
    passes,
    service,
    sigmoid,
)
from trainer.checking.runner import run_check

__all__ = ["service"]  # the fixture, shared with test_truth


def test_a_backward_keeping_outputs_in_a_table_of_the_last_two_calls_fails(service, tmp_path):
    """ctx holds only a key; the saved outputs live in a module-level table of the two
    newest calls, and an evicted call borrows the newest of its shape. Two calls in one
    graph fit the table: a network with three sigmoid layers gets a wrong gradient.
    Remove ``_many_in_one_graph`` from the scenarios and this file passes."""
    source = """
        import torch

        _recent = {}
        _count = [0]


        class MySigmoid(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                y = torch.sigmoid(x)
                _count[0] += 1
                ctx.key = _count[0]
                _recent[ctx.key] = y.detach()
                for old in sorted(_recent)[:-2]:
                    del _recent[old]
                return y

            @staticmethod
            def backward(ctx, grad_output):
                y = _recent.get(ctx.key)
                if y is None:  # evicted: the newest of its shape, else the newest
                    newest = [v for _, v in sorted(_recent.items(), reverse=True)]
                    y = next((v for v in newest if v.shape == grad_output.shape), newest[0])
                    y = y.expand_as(grad_output) if y.numel() == 1 else y
                return grad_output * y * (1 - y)
    """
    stage, message, mistake = first_failure(check(service, tmp_path, "sigmoid", source))
    assert stage == "state"
    assert "calls alive in one graph" in message and "table of recent calls" in message
    assert mistake == "state_outside_ctx"


def test_a_backward_that_keeps_its_own_ctx_passes_many_calls_in_one_graph(service, tmp_path):
    passes(check(service, tmp_path, "sigmoid", sigmoid(SAVES_OUTPUT, RIGHT_BACKWARD)))


@pytest.mark.parametrize(
    ("what", "side_effect", "named"),
    [
        ("output", "ctx.out.data.mul_(-1.0)", "forward's output"),
        ("input", "ctx.inp.data.mul_(1.5)", "`x`"),
    ],
)
def test_a_backward_that_changes_the_callers_tensors_through_data_fails(
    service, tmp_path, what, side_effect, named
):
    """An in-place op through ``.data`` moves no version counter: autograd never knows,
    and the caller's activation or weight is silently changed. Remove the comparison of
    forward's inputs and outputs before and after backward (``_held_tensors`` in the
    backward request) and these files pass."""
    source = f"""
        import torch


        class MySigmoid(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                y = torch.sigmoid(x)
                ctx.save_for_backward(x)
                ctx.out, ctx.inp = y, x
                return y

            @staticmethod
            def backward(ctx, grad_output):
                (x,) = ctx.saved_tensors
                s = torch.sigmoid(x)
                grad = grad_output * s * (1 - s)
                {side_effect}
                return grad
    """
    stage, message, mistake = first_failure(check(service, tmp_path, "sigmoid", source))
    assert stage == "backward", what  # backward parity's calls go through the same check
    assert f"backward changed {named} in place" in message
    assert mistake == "changes_caller_tensors"


def test_a_backward_that_changes_its_saved_output_in_place_fails_naming_the_output(
    service, tmp_path
):
    """The saved output is the very tensor the caller holds: ``y.mul_`` in backward
    rewrites the caller's activation (and a second backward over the graph reads the
    product). Found at the first backward, before calls as in training see the second
    pass."""
    backward = """
        (y,) = ctx.saved_tensors
        y.mul_(1 - y)
        return grad_output * y
    """
    source = sigmoid(SAVES_OUTPUT, backward)
    stage, message, mistake = first_failure(check(service, tmp_path, "sigmoid", source))
    assert (stage, mistake) == ("backward", "changes_caller_tensors")
    assert "backward changed forward's output in place" in message


def test_a_backward_that_writes_only_into_its_own_new_tensors_passes_the_contract(
    service, tmp_path
):
    """In-place work on tensors backward made itself is fine, NaN inputs or not."""
    backward = """
        (y,) = ctx.saved_tensors
        slope = y.clone()
        slope.mul_(1 - y)
        return slope.mul_(grad_output)
    """
    source = sigmoid(SAVES_OUTPUT, backward)
    passes(check(service, tmp_path, "sigmoid", source))


@pytest.mark.parametrize("name", ["torchrelu", "torch_relu", "torch", "copy", "numpy"])
def test_a_right_file_named_after_torch_or_another_module_passes(service, tmp_path, name):
    """A learner module called ``torchrelu`` was taken for torch's own (its name starts
    with the word), so its class had no forward of its own; one called ``torch`` or
    ``numpy`` stood in for the real module. Make ``loading.torchs`` a prefix test
    again, or let ``module_name`` take any stem, and these fail."""
    source = (REPO / "solutions" / "relu.py").read_text(encoding="utf-8")
    path = tmp_path / f"{name}.py"
    path.write_text(source, encoding="utf-8")
    passes(run_check(CATALOG.get("relu"), path, service=service))


def test_a_trailing_none_for_a_keyword_only_parameter_with_a_default_passes(service, tmp_path):
    """autograd takes a trailing None for it as for any; the contract's own words said
    a parameter with a default may have one, and then refused it."""
    source = """
        import torch


        class MyReLU(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, *, inplace=False):
                ctx.save_for_backward(x)
                return x.clamp(min=0)

            @staticmethod
            def backward(ctx, grad_output):
                (x,) = ctx.saved_tensors
                return grad_output * (x > 0), None
    """
    passes(check(service, tmp_path, "relu", source))


def test_a_backward_that_clamps_the_callers_input_in_place_fails_where_it_changes_it(
    service, tmp_path
):
    """``x.clamp_`` for `x.clamp`: the gradient is right, and only inputs beyond the clamp
    change, which the contract's small values never reach; the domain's large ones do,
    through the proxy's backward. Drop the ``changed`` check in the proxy's backward and
    this file passes."""
    source = """
        import torch


        class MySoftplus(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.x = x
                return torch.clamp(x, min=0) + torch.log1p(torch.exp(-x.abs()))

            @staticmethod
            def backward(ctx, grad_output):
                return grad_output * torch.sigmoid(ctx.x.clamp_(-40.0, 40.0))
    """
    stage, message, mistake = first_failure(check(service, tmp_path, "softplus", source))
    assert stage == "stability"
    assert mistake == "changes_caller_tensors"
    assert "backward changed `x` in place" in message


BLINDS_THE_WATCH = """
    import gc
    import torch


    def blind():
        for found in gc.get_objects():
            if type(found).__name__ == "DerivationWatch":
                {how}


    class MySigmoid(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            blind()
            ctx.save_for_backward(x)
            return torch.sigmoid(x)

        @staticmethod
        def backward(ctx, grad_output):
            (x,) = ctx.saved_tensors
            _, vjp = torch.func.vjp(torch.sigmoid, x)
            return vjp(grad_output)[0]
"""


@pytest.mark.parametrize(
    ("how", "words"),
    [
        ("found._add = lambda *a, **k: None", "attribute '_add' is read-only"),
        ("type(found)._add = lambda *a, **k: None", "_add"),
    ],
    ids=["on the watch", "on its class"],
)
def test_a_file_that_finds_the_derivation_watch_and_blinds_it_fails(service, tmp_path, how, words):
    """The watch shares the learner's process, where gc finds it. A method put on the
    watch itself cannot be (it has no instance dict: remove ``__slots__`` from
    DerivationWatch and the first file passes); one put on its class is a patch the
    guard names (remove ``guard.also_guard(...)`` and the second passes)."""
    source = BLINDS_THE_WATCH.replace("{how}", how)
    report = check(service, tmp_path, "sigmoid", source)
    assert not report.passed
    failed = report.first_failure
    assert failed is not None and words in failed.message + " ".join(failed.details)


UNDER_A_SWITCH = """
    import torch
    from torch.utils._python_dispatch import _disable_current_modes

    PYTHON_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.Python) | torch._C.DispatchKeySet(
        torch._C.DispatchKey.PythonTLSSnapshot
    )


    class MySigmoid(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = torch.sigmoid(x)
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, grad_output):
            (y,) = ctx.saved_tensors
            with {switch}:
                return torch.ops.aten.sigmoid_backward(grad_output, y)
"""


@pytest.mark.parametrize(
    ("switch", "named"),
    [
        ("torch._C._DisableTorchDispatch()", "torch._C._DisableTorchDispatch"),
        ("torch._C._ExcludeDispatchKeyGuard(PYTHON_KEYS)", "torch._C._ExcludeDispatchKeyGuard"),
        ("_disable_current_modes()", "torch.utils._python_dispatch._disable_current_modes"),
    ],
)
def test_torchs_backward_kernel_run_under_a_switch_that_hides_it_fails_by_hand(
    service, tmp_path, switch, named
):
    """Under one of torch's switches an op reaches its kernel past the watch's dispatch
    mode, which stays on its stack. The zygote puts a reporting wrapper in place of each
    switch (even ``from ... import``, made before); remove
    ``derivation.watch_mode_switches`` and these files pass."""
    source = UNDER_A_SWITCH.replace("{switch}", switch)
    stage, message, _ = first_failure(check(service, tmp_path, "sigmoid", source))
    assert stage == "by_hand"
    assert f"switches off the check of how the gradient is derived ({named})" in message


def test_printing_tensors_in_backward_is_no_switch_of_the_learners(service, tmp_path):
    """torch's own code uses the switches (a tensor's repr does): not reported."""
    source = """
        import torch


        class MySigmoid(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                y = torch.sigmoid(x)
                print(y, repr(x), f"{y.sum():.3f}")
                ctx.save_for_backward(y)
                return y

            @staticmethod
            def backward(ctx, grad_output):
                (y,) = ctx.saved_tensors
                grad = grad_output * y * (1 - y)
                print("grad", grad, torch.nn.Parameter(grad.detach().clone()))
                return grad
    """
    passes(check(service, tmp_path, "sigmoid", source))


def test_torchs_layer_norm_formula_from_a_decomp_module_loaded_by_the_file_fails(service, tmp_path):
    """The zygote lists torch._decomp's formulas from the modules loaded then; one the
    learner's file imports afterwards (decompositions_for_jvp) was missed. A formula is
    now known by its folder too: remove that (``_DECOMP_DIR`` in the stack walk) and this
    file passes."""
    source = """
        import torch
        from torch._decomp import decompositions_for_jvp as formulas


        class MyLayerNorm(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, weight, bias, eps):
                mean = x.mean(dim=-1, keepdim=True)
                rstd = torch.rsqrt(((x - mean) ** 2).mean(dim=-1, keepdim=True) + eps)
                ctx.save_for_backward(x, weight, bias, mean, rstd)
                return (x - mean) * rstd * weight + bias

            @staticmethod
            def backward(ctx, grad_output):
                x, weight, bias, mean, rstd = ctx.saved_tensors
                gx, gw, gb = formulas.native_layer_norm_backward(
                    grad_output, x, [x.shape[-1]], mean, rstd, weight, bias, [True] * 3
                )
                return gx, gw, gb, None
    """
    stage, message, _ = first_failure(check(service, tmp_path, "layer_norm", source))
    assert stage == "by_hand"
    assert "torch._decomp's native_layer_norm_backward" in message


def test_a_python_key_excluded_by_hand_around_torchs_kernel_fails_by_hand(service, tmp_path):
    """The thread-local switch under every key guard, set and unset by hand."""
    source = """
        import torch

        KEYS = (torch._C.DispatchKey.Python, torch._C.DispatchKey.PythonTLSSnapshot)


        class MySigmoid(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                y = torch.sigmoid(x)
                ctx.save_for_backward(y)
                return y

            @staticmethod
            def backward(ctx, grad_output):
                (y,) = ctx.saved_tensors
                for key in KEYS:
                    torch._C._dispatch_tls_set_dispatch_key_excluded(key, True)
                try:
                    return torch.ops.aten.sigmoid_backward(grad_output, y)
                finally:
                    for key in KEYS:
                        torch._C._dispatch_tls_set_dispatch_key_excluded(key, False)
    """
    stage, message, _ = first_failure(check(service, tmp_path, "sigmoid", source))
    assert stage == "by_hand"
    assert "torch._C._dispatch_tls_set_dispatch_key_excluded" in message


def test_a_backward_that_changes_the_callers_tensor_only_under_the_engine_fails(service, tmp_path):
    """It tells the engine's call (a graph task running) from the checker's direct one
    and changes the caller's activation only then. Calls in one graph compare forward's
    inputs and outputs after the engine's backward too: drop that (``held`` in the
    learner's ``one_graph``) and this file passes."""
    source = """
        import torch


        class MyReLU(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x.clamp(min=0)

            @staticmethod
            def backward(ctx, grad_output):
                (x,) = ctx.saved_tensors
                grad = grad_output * (x > 0)
                if torch._C._current_graph_task_id() >= 0:
                    x.data.mul_(2)  # keeps the sign: every gradient stays right
                return grad
    """
    stage, message, mistake = first_failure(check(service, tmp_path, "relu", source))
    assert (stage, mistake) == ("state", "changes_caller_tensors")
    assert "backward changed `input` in place" in message  # relu's parameter name


CLASSMETHODS = """
    import torch


    class MySigmoid(torch.autograd.Function):
        @classmethod
        def forward(cls, ctx, x):
            y = torch.sigmoid(x)
            ctx.save_for_backward(x if cls.FROM_INPUT else y)
            return y

        @classmethod
        def backward(cls, ctx, grad_output):
            (saved,) = ctx.saved_tensors
            {backward}

        FROM_INPUT = {from_input}
"""


def test_classmethod_forward_and_backward_pass_as_torch_binds_them(service, tmp_path):
    """torch calls ``cls.forward(ctx, ...)`` and ``cls.backward(ctx, ...)``: a classmethod
    binds the class first and works. Load refused it as "not a @staticmethod"."""
    source = CLASSMETHODS.replace("{from_input}", "False").replace(
        "{backward}", "return grad_output * saved * (1 - saved)"
    )
    passes(check(service, tmp_path, "sigmoid", source))


def test_a_classmethod_backward_is_watched_as_a_staticmethod_is(service, tmp_path):
    """Accepted, it must not be a way past the derivation watch: wrapped as a classmethod
    (``DerivationWatch._install``). Wrap it as before and the file passes unwatched."""
    backward = "\n            ".join(
        [
            "with torch.enable_grad():",
            "    x = saved.detach().requires_grad_()",
            "    return torch.autograd.grad(torch.sigmoid(x), x, grad_output)[0]",
        ]
    )
    source = CLASSMETHODS.replace("{from_input}", "True").replace("{backward}", backward)
    stage, message, _ = first_failure(check(service, tmp_path, "sigmoid", source))
    assert stage == "by_hand"
    assert "torch.autograd.grad" in message


def test_a_saved_tensor_changed_in_place_and_back_is_named_not_blamed_on_state(service, tmp_path):
    """Scaled in place and back, the saved tensor's values are right, but its version
    moved: torch refuses a second backward over the graph. The report said "state
    outside ctx"; it names the saved tensor now. Drop ``_saved_tensor_changed`` from
    ``learner_error`` and the mistake's id goes back to state."""
    backward = """
        (y,) = ctx.saved_tensors
        y.mul_(2.0)
        slope = y * (1 - y / 2) / 2
        y.mul_(0.5)
        return grad_output * slope
    """
    forward = """
        y = torch.sigmoid(x)
        ctx.save_for_backward(y)
        return y.clone()
    """
    stage, message, mistake = first_failure(
        check(service, tmp_path, "sigmoid", sigmoid(forward, backward))
    )
    assert (stage, mistake) == ("state", "modifies_saved_tensor")
    assert "a tensor saved for backward was changed in place" in message
