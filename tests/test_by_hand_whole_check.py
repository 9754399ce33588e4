""" "Derived by hand" watches the learner's file from its first line to the check's last call.

Every file here gets each value right, so only the watch can tell a derivation by
hand from one that torch, a graph tracer, finite differences or sympy did. They
go through the real check (a learner process of their own, every stage), and the
"Derived by hand" stage, which runs last, reports what the watch saw in all of them.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.conftest import CATALOG, shared_service
from trainer.checking.report import CheckReport, StageResult, Verdict
from trainer.checking.runner import run_check
from trainer.vocabulary import STAGE_IDS


def check(tmp_path: Path, exercise: str, source: str) -> CheckReport:
    path = tmp_path / f"{exercise}.py"
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return run_check(CATALOG.get(exercise), path, service=shared_service())


def by_hand(report: CheckReport) -> StageResult:
    return next(s for s in report.stages if s.id == "by_hand")


def fails_by_hand(report: CheckReport, *words: str, alone: bool = True) -> str:
    """The by_hand stage failed naming ``words``; with ``alone``, every other stage
    passed (the values are right: only the watch can tell)."""
    stage = by_hand(report)
    assert stage.verdict is Verdict.FAIL, (stage.message, stage.details)
    others = [(s.id, s.message) for s in report.stages if s.id != "by_hand"]
    if alone:
        assert all(s.verdict is not Verdict.FAIL for s in report.stages if s.id != "by_hand"), (
            others
        )
    text = "\n".join([stage.message, *stage.details])
    for word in words:
        assert word in text, text
    assert "derive the gradient yourself" in stage.message
    return text


def passes(report: CheckReport) -> None:
    assert report.passed, [(s.id, s.message) for s in report.stages if s.verdict is Verdict.FAIL]


def test_the_derived_by_hand_stage_runs_last() -> None:
    assert STAGE_IDS[-1] == "by_hand"


# Watched in every request, not in two sampled runs ------------------------------------------

REPLAYS_WHAT_IT_HAS_SEEN = """\
import torch

_seen = {}


class MySigmoid(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.sigmoid(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        key = (x.dtype, tuple(x.shape), x.detach().numpy().tobytes())
        if key not in _seen:  # new inputs: let autograd do it, and keep the answer
            with torch.enable_grad():
                leaf = x.detach().requires_grad_()
                (slope,) = torch.autograd.grad(torch.sigmoid(leaf).sum(), leaf)
            _seen[key] = slope
        return grad_output * _seen[key]  # inputs seen before: replay
"""


def test_a_backward_that_uses_autograd_on_new_inputs_and_replays_seen_ones_fails(tmp_path):
    """The stage's own two runs use inputs of earlier stages: only a watch over every
    request sees the autograd pass."""
    fails_by_hand(check(tmp_path, "sigmoid", REPLAYS_WHAT_IT_HAS_SEEN), "torch.autograd.grad")


HONEST_AT_FIRST = """\
import torch

_calls = [0]


class MySigmoid(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.sigmoid(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        _calls[0] += 1
        if _calls[0] > 300:  # late in the check: the 500 calls in a row
            with torch.enable_grad():
                leaf = x.detach().requires_grad_()
                return torch.autograd.grad(torch.sigmoid(leaf), leaf, grad_output)[0]
        s = torch.sigmoid(x)
        return grad_output * s * (1 - s)
"""


def test_a_backward_that_lets_autograd_work_only_late_in_the_check_fails(tmp_path):
    """Seen in "Calls as in training", which runs after where "Derived by hand" once was."""
    fails_by_hand(check(tmp_path, "sigmoid", HONEST_AT_FIRST), "torch.autograd.grad")


# Only within the 500 calls in a row (about calls 60 to 560 of a sigmoid check).
HIDDEN_LATE = HONEST_AT_FIRST.replace("if _calls[0] > 300:", "if 200 < _calls[0] <= 400:").replace(
    "            with torch.enable_grad():",
    "            from torch.utils._python_dispatch import _disable_current_modes\n\n"
    "            with torch.enable_grad(), _disable_current_modes():",
)


def test_a_backward_pass_hidden_from_the_dispatch_mode_in_the_calls_in_a_row_fails(tmp_path):
    """Those calls probe no counter each: one count over the request finds the pass."""
    assert "_disable_current_modes()" in HIDDEN_LATE and "200 < _calls" in HIDDEN_LATE
    text = fails_by_hand(check(tmp_path, "sigmoid", HIDDEN_LATE), "out of the watch's sight")
    assert "autograd backward pass (in backward)" in text


ONLY_WHEN_UNWATCHED = """\
import torch


from torch.utils._python_dispatch import _get_current_dispatch_mode_stack


def _watched():
    return bool(_get_current_dispatch_mode_stack()) or hasattr(MySigmoid.backward, "__wrapped__")


class MySigmoid(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        ctx.unwatched = not _watched()
        return torch.sigmoid(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        if ctx.unwatched:
            with torch.enable_grad():
                leaf = x.detach().requires_grad_()
                return torch.autograd.grad(torch.sigmoid(leaf), leaf, grad_output)[0]
        s = torch.sigmoid(x)
        return grad_output * s * (1 - s)
"""


def test_a_function_that_looks_for_the_watch_finds_it_in_every_call(tmp_path):
    # Honest whenever it sees the watch: with the watch in every call, it is honest.
    passes(check(tmp_path, "sigmoid", ONLY_WHEN_UNWATCHED))


# Derived at import -------------------------------------------------------------------------

TRACED_AT_IMPORT = """\
import torch
from torch._decomp import core_aten_decompositions
from torch.fx.experimental.proxy_tensor import make_fx


def _slope(x, g):
    return torch.autograd.grad(torch.sigmoid(x), x, g)[0]


# torch's derivative of the reference, traced into a graph of plain aten ops.
_GRAPH = make_fx(_slope, decomposition_table=core_aten_decompositions())(
    torch.zeros(3, requires_grad=True), torch.ones(3)
)


class MySigmoid(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.sigmoid(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return _GRAPH(x, grad_output)
"""


def test_a_gradient_traced_into_a_graph_at_import_and_replayed_fails(tmp_path):
    text = fails_by_hand(check(tmp_path, "sigmoid", TRACED_AT_IMPORT), "importing your file")
    assert "graph tracer" in text


SELF_TEST_AT_IMPORT = """\
import torch


class MySigmoid(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.sigmoid(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(x)
        return grad_output * s * (1 - s)


# Self-tests at import, as learners write them.
_x = torch.randn(6, dtype=torch.float64, requires_grad=True)
assert torch.autograd.gradcheck(MySigmoid.apply, (_x,))
MySigmoid.apply(_x).sum().backward()
_expected = torch.autograd.grad(torch.sigmoid(_x).sum(), _x)[0]
assert torch.allclose(_x.grad, _expected)
print("self-test passed", MySigmoid.apply(_x).grad_fn is not None)
"""


def test_a_file_that_tests_its_function_with_autograd_at_import_passes(tmp_path):
    passes(check(tmp_path, "sigmoid", SELF_TEST_AT_IMPORT))


# jvp and vmap staticmethods -----------------------------------------------------------------

JVP_BY_TORCH_FUNC = """\
import torch


class ScaledDot(torch.autograd.Function):
    @staticmethod
    def forward(x, y, scale):
        return scale * (x * y).sum(dim=-1)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, y, scale = inputs
        ctx.save_for_backward(x, y)
        ctx.save_for_forward(x, y)
        ctx.scale = scale

    @staticmethod
    def backward(ctx, grad_output):
        x, y = ctx.saved_tensors
        g = ctx.scale * grad_output.unsqueeze(-1)
        return g * y, g * x, None

    @staticmethod
    def jvp(ctx, x_t, y_t, _):
        x, y = ctx.saved_tensors
        scale = ctx.scale
        return torch.func.jvp(lambda a, b: scale * (a * b).sum(dim=-1), (x, y), (x_t, y_t))[1]
"""


def test_a_jvp_that_calls_torch_func_jvp_fails_by_hand(tmp_path):
    # Nested forward mode fails on dual tensors (the jvp stage says so); by_hand names it.
    report = check(tmp_path, "dot_jvp", JVP_BY_TORCH_FUNC)
    fails_by_hand(report, "torch.func.jvp (in jvp)", alone=False)


VMAP_RULE = """\
import torch


class Normalize(torch.autograd.Function):
    @staticmethod
    def forward(x):
        return x / x.norm(dim=-1, keepdim=True)

    @staticmethod
    def setup_context(ctx, inputs, output):
        (x,) = inputs
        ctx.save_for_backward(x, output)

    @staticmethod
    def backward(ctx, grad_output):
        x, y = ctx.saved_tensors
        along = (y * grad_output).sum(dim=-1, keepdim=True)
        return (grad_output - y * along) / x.norm(dim=-1, keepdim=True)

    @staticmethod
    def vmap(info, in_dims, x):
{body}
"""


def vmap_rule(body: str) -> str:
    return VMAP_RULE.format(body=textwrap.indent(textwrap.dedent(body).strip(), " " * 8))


def test_a_vmap_rule_in_plain_ops_that_lets_autograd_derive_per_sample_gradients_fails(
    tmp_path,
):
    body = """
        x = x.movedim(in_dims[0], 0)
        return x / x.norm(dim=-1, keepdim=True), 0
    """
    text = fails_by_hand(check(tmp_path, "normalize_vmap", vmap_rule(body)), "vmap")
    assert "your backward never runs" in text


def test_a_vmap_rule_written_as_a_loop_over_the_batch_passes(tmp_path):
    body = """
        x = x.movedim(in_dims[0], 0)
        return torch.stack([Normalize.apply(row) for row in x.unbind(0)]), 0
    """
    passes(check(tmp_path, "normalize_vmap", vmap_rule(body)))


# Numeric and symbolic differentiation -------------------------------------------------------

SIGMOID = """\
import torch
{imports}

def f(x):
    return torch.sigmoid(x)


class MySigmoid(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return f(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
{body}
"""


def sigmoid(body: str, imports: str = "") -> str:
    return SIGMOID.format(
        imports=imports, body=textwrap.indent(textwrap.dedent(body).strip(), " " * 8)
    )


NUMERIC = {
    "central differences in float64": """
        h = 1e-6
        x = x.double()
        slope = (f(x + h) - f(x - h)) / (2 * h)
        return (grad_output * slope).to(grad_output.dtype)
    """,
    "forward differences": """
        h = 1e-7
        x = x.double()
        slope = (f(x + h) - f(x)) / h
        return (grad_output * slope).to(grad_output.dtype)
    """,
    "forward called on a perturbed copy": """
        h = 1e-6
        x = x.double()
        up = MySigmoid.forward(ctx, x + h)
        down = MySigmoid.forward(ctx, x - h)
        return (grad_output * (up - down) * (0.5 / h)).to(grad_output.dtype)
    """,
}


@pytest.mark.parametrize("body", NUMERIC.values(), ids=NUMERIC.keys())
def test_finite_differences_in_backward_fail_by_hand(tmp_path, body):
    report = check(tmp_path, "sigmoid", sigmoid(body))
    stage = by_hand(report)
    assert stage.verdict is Verdict.FAIL, stage.message
    assert "finite differences" in stage.message and "numerically" in stage.message


def test_the_complex_step_in_backward_fails_by_hand(tmp_path):
    body = """
        h = 1e-20
        z = torch.complex(x.double(), torch.full_like(x, h, dtype=torch.float64))
        slope = f(z).imag / h
        return (grad_output * slope).to(grad_output.dtype)
    """
    # Unstable for large |x| (Domain and stability fails too): by_hand names the step.
    text = fails_by_hand(check(tmp_path, "sigmoid", sigmoid(body)), "complex step", alone=False)
    assert "numerically" in text


def test_a_gradient_derived_by_sympy_fails_by_hand(tmp_path):
    imports = """
import sympy

_t = sympy.Symbol("t")
_slope = sympy.lambdify(_t, sympy.diff(1 / (1 + sympy.exp(-_t)), _t), modules=[torch])
"""
    body = "return grad_output * _slope(x)"
    report = check(tmp_path, "sigmoid", sigmoid(body, imports))
    fails_by_hand(report, "sympy", "lets sympy derive the gradient", alone=False)


RECOMPUTES = {
    "recomputes the forward's function on the saved input": """
        s = f(x)
        return grad_output * s * (1 - s)
    """,
    "adds a small epsilon to a tensor, as a guard": """
        eps = 1e-12
        s = f(x)
        return grad_output * s * (1 - s) * ((s + eps) / (s + eps))
    """,
}


@pytest.mark.parametrize("body", RECOMPUTES.values(), ids=RECOMPUTES.keys())
def test_a_backward_that_recomputes_forward_quantities_passes(tmp_path, body):
    passes(check(tmp_path, "sigmoid", sigmoid(body)))


# Forward mode left open, and torch's formulas written in Python ----------------------------

LEVEL_LEFT_OPEN_AT_IMPORT = """\
import torch
import torch.autograd.forward_ad as fwAD

_LEVEL = torch._C._enter_dual_level()  # never closed


class MySoftmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, dim):
        y = torch.softmax(x, dim)
        ctx.save_for_backward(x)
        ctx.dim = dim
        return y

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        # The Jacobian is symmetric: a product with g from the left is one from the right.
        dual = fwAD.make_dual(x, grad_output.contiguous(), level=_LEVEL)
        tangent = fwAD.unpack_dual(torch.softmax(dual, ctx.dim), level=_LEVEL).tangent
        return tangent, None
"""


def test_forward_mode_through_a_level_opened_at_import_fails_by_hand(tmp_path):
    """Only the checker's own dual levels (its jvp request) are not the learner's: a level
    the file opened at import and kept is. Let every open level count as the checker's
    (``checkers_forward_ad`` ignored in ``_open``) and this test fails."""
    fails_by_hand(check(tmp_path, "softmax", LEVEL_LEFT_OPEN_AT_IMPORT), "forward-mode")


TORCH_FORMULA_IN_PYTHON = """\
import torch
from torch._decomp import decomposition_table

_BACKWARD = decomposition_table[torch.ops.aten.native_layer_norm_backward.default]


class MyLayerNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        mean = x.mean(-1, keepdim=True)
        rstd = torch.rsqrt(((x - mean) ** 2).mean(-1, keepdim=True) + eps)
        ctx.save_for_backward(x, weight, bias, mean, rstd)
        return (x - mean) * rstd * weight + bias

    @staticmethod
    def backward(ctx, g):
        x, weight, bias, mean, rstd = ctx.saved_tensors
        shape = [x.shape[-1]]
        gx, gw, gb = _BACKWARD(g, x, shape, mean, rstd, weight, bias, [True, True, True])
        return gx, gw, gb, None
"""


def test_torchs_backward_formula_written_in_python_fails_by_hand(tmp_path):
    """torch._decomp holds torch's derivative formulas as Python made of plain ops: no
    ``*_backward`` kernel runs. Drop the formula check of ``_see_op`` and this fails."""
    text = fails_by_hand(check(tmp_path, "layer_norm", TORCH_FORMULA_IN_PYTHON))
    assert "native_layer_norm_backward" in text
