"""The Function API exercises: for each, a right file in an odd style that passes, torch's own
examples where they fit, and wrong files that fail at the stage, and for the reason, stated.

All checks share one warm checking server, as tests/test_truth.py does.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest
import torch

from tests.conftest import CATALOG, shared_service
from trainer.checking.report import CheckReport, Verdict
from trainer.checking.runner import CheckingService, run_check


@pytest.fixture
def service() -> CheckingService:
    return shared_service()  # the worker's warm server: each check forks a fresh learner


def check(
    service: CheckingService, tmp_path: Path, exercise: str, source: str, **options: object
) -> CheckReport:
    path = tmp_path / f"{exercise}.py"
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return run_check(CATALOG.get(exercise), path, service=service, **options)  # type: ignore[arg-type]


def first_failure(report: CheckReport) -> tuple[str, str, str]:
    failed = report.first_failure
    assert failed is not None, [(s.id, s.verdict, s.message) for s in report.stages]
    mistake = (failed.diagnosis or {}).get("mistake", "")
    return failed.id, failed.message, str(mistake)


def passes(report: CheckReport) -> None:
    assert report.passed, [(s.id, s.message) for s in report.stages if s.verdict is Verdict.FAIL]


def stage_verdict(report: CheckReport, stage: str) -> Verdict:
    return next(s.verdict for s in report.stages if s.id == stage)


def torch_example(*names: str) -> str:
    """Functions and classes from torch's own collection of autograd.Function test cases
    (torch/testing/_internal/autograd_function_db.py), read as text: importing it needs
    torch's test dependencies."""
    path = Path(torch.__file__).parent / "testing" / "_internal" / "autograd_function_db.py"
    text = path.read_text(encoding="utf-8")
    found = {
        node.name: ast.get_source_segment(text, node) or ""
        for node in ast.parse(text).body
        if isinstance(node, ast.FunctionDef | ast.ClassDef)
    }
    return "\n\n\n".join(found[name] for name in names)


# 1. mark_dirty: in-place exp ----------------------------------------------------------------


def test_torchs_own_in_place_exp_from_its_autograd_function_db_passes(service, tmp_path):
    source = "import numpy as np\nimport torch\n\n\n" + torch_example(
        "to_numpy", "NumpyMul", "NumpyExp_"
    ).replace("NumpyExp_", "ExpInPlace")
    report = check(service, tmp_path, "exp_inplace", source)
    passes(report)
    assert stage_verdict(report, "mark_dirty") is Verdict.PASS


def test_an_in_place_exp_written_with_out_and_marked_before_the_write_passes(service, tmp_path):
    source = """\
    import torch


    class ExpInPlace(torch.autograd.Function):
        @staticmethod
        def forward(x):
            return torch.exp(x, out=x)

        @staticmethod
        def setup_context(ctx, inputs, output):
            (x,) = inputs
            ctx.mark_dirty(x)
            ctx.save_for_backward(output)

        @staticmethod
        def backward(ctx, g):
            return g * ctx.saved_tensors[0]
    """
    passes(check(service, tmp_path, "exp_inplace", source))


def test_an_in_place_write_without_mark_dirty_fails_naming_the_call_to_add(service, tmp_path):
    source = """\
    import torch


    class ExpInPlace(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            torch.exp(x, out=x)
            ctx.y = x
            return x

        @staticmethod
        def backward(ctx, g):
            return g * ctx.y
    """
    stage, message, mistake = first_failure(check(service, tmp_path, "exp_inplace", source))
    assert (stage, mistake) == ("mark_dirty", "not_marked_dirty")
    assert "forward returned a new tensor, not its modified input" in message
    assert "ctx.mark_dirty(x)" in message


def test_an_exp_that_writes_into_a_fresh_buffer_is_not_in_place(service, tmp_path):
    source = """\
    import torch


    class ExpInPlace(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = torch.empty_like(x)
            torch.exp(x, out=y)
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            return g * ctx.saved_tensors[0]
    """
    stage, message, mistake = first_failure(check(service, tmp_path, "exp_inplace", source))
    assert (stage, mistake) == ("mark_dirty", "not_in_place")
    assert "leaves `x` unchanged" in message


def test_without_mark_dirty_torch_itself_refuses_an_input_returned_as_is_with_setup_context(
    service, tmp_path
):
    source = """\
    import torch


    class ExpInPlace(torch.autograd.Function):
        @staticmethod
        def forward(x):
            return x.exp_()

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(output)

        @staticmethod
        def backward(ctx, g):
            return g * ctx.saved_tensors[0]
    """
    stage, message, _ = first_failure(check(service, tmp_path, "exp_inplace", source))
    assert stage == "forward"
    assert "returned as-is as output is being saved for backward" in message


# 2. mark_non_differentiable: top-k ------------------------------------------------------------


def test_topk_with_setup_context_and_a_scatter_add_passes(service, tmp_path):
    source = """\
    import torch


    class TopK(torch.autograd.Function):
        @staticmethod
        def forward(x, k):
            return torch.topk(x, k)

        @staticmethod
        def setup_context(ctx, inputs, output):
            x, _ = inputs
            _, idx = output
            ctx.mark_non_differentiable(idx)
            ctx.save_for_backward(idx)
            ctx.n = x.shape[-1]

        @staticmethod
        def backward(ctx, g_values, g_indices):
            (idx,) = ctx.saved_tensors
            out = g_values.new_zeros(*g_values.shape[:-1], ctx.n)
            return out.scatter_add_(-1, idx, g_values), None
    """
    report = check(service, tmp_path, "topk", source)
    passes(report)
    assert stage_verdict(report, "non_differentiable") is Verdict.PASS


def test_a_backward_that_matches_values_sends_a_tied_gradient_to_every_equal_element(
    service, tmp_path
):
    source = """\
    import torch


    class TopK(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            values, indices = x.topk(k)
            ctx.mark_non_differentiable(indices)
            ctx.save_for_backward(x, values)
            return values, indices

        @staticmethod
        def backward(ctx, grad_out1, grad_out2):
            x, values = ctx.saved_tensors
            # Where does each value sit? Where x equals it: every equal element at a tie.
            hits = (x.unsqueeze(-2) == values.unsqueeze(-1)).to(x.dtype)
            return (grad_out1.unsqueeze(-1) * hits).sum(-2), None
    """
    stage, message, mistake = first_failure(check(service, tmp_path, "topk", source))
    assert (stage, mistake) == ("non_differentiable", "tie_gradient")
    assert "with tied values in `x`" in message
    assert "the elements your indices name" in message


def test_forgetting_the_mark_in_setup_context_names_the_output_and_the_call(service, tmp_path):
    source = """\
    import torch


    class TopK(torch.autograd.Function):
        @staticmethod
        def forward(x, k):
            return torch.topk(x, k)

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(output[1])
            ctx.shape = inputs[0].shape

        @staticmethod
        def backward(ctx, g, _):
            (idx,) = ctx.saved_tensors
            return g.new_zeros(ctx.shape).scatter(-1, idx, g), None
    """
    stage, message, mistake = first_failure(check(service, tmp_path, "topk", source))
    assert (stage, mistake) == ("non_differentiable", "not_marked_non_differentiable")
    assert "output 2" in message and "ctx.mark_non_differentiable" in message


# 3. jvp: forward mode -----------------------------------------------------------------------


def test_a_jvp_in_the_combined_forward_passes_with_dual_tensors_and_a_note_about_torch_func(
    service, tmp_path
):
    # The shape of the save_for_forward example in torch's docs: forward(ctx, ...), the
    # saved tensors for both modes, and the backward under its other name, vjp.
    source = """\
    import torch


    class ScaledDot(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, y, scale):
            ctx.save_for_backward(x, y)
            ctx.save_for_forward(x, y)
            ctx.scale = scale
            return scale * torch.einsum("...k,...k->...", x, y)

        @staticmethod
        def jvp(ctx, x_t, y_t, _):
            x, y = ctx.saved_tensors
            return ctx.scale * (torch.einsum("...k,...k->...", x_t, y) + torch.einsum("...k,...k->...", x, y_t))

        @staticmethod
        def vjp(ctx, grad_out):
            x, y = ctx.saved_tensors
            g = (ctx.scale * grad_out)[..., None]
            return g * y, g * x, None
    """
    report = check(service, tmp_path, "dot_jvp", source)
    passes(report)
    jvp = next(s for s in report.stages if s.id == "jvp")
    assert "dual tensors)" in jvp.message


def test_a_jvp_that_drops_the_y_term_fails_naming_the_tangent_on_y(service, tmp_path):
    source = """\
    import torch


    class ScaledDot(torch.autograd.Function):
        @staticmethod
        def forward(x, y, scale):
            return scale * (x * y).sum(-1)

        @staticmethod
        def setup_context(ctx, inputs, output):
            x, y, scale = inputs
            ctx.save_for_backward(x, y)
            ctx.save_for_forward(y)
            ctx.scale = scale

        @staticmethod
        def backward(ctx, g):
            x, y = ctx.saved_tensors
            g = ctx.scale * g.unsqueeze(-1)
            return g * y, g * x, None

        @staticmethod
        def jvp(ctx, x_t, y_t, _):
            (y,) = ctx.saved_tensors
            return ctx.scale * (x_t * y).sum(-1)
    """
    stage, message, mistake = first_failure(check(service, tmp_path, "dot_jvp", source))
    assert (stage, mistake) == ("jvp", "wrong_jvp")
    assert "jvp gives a wrong tangent for a tangent on `y` only" in message


def test_a_function_without_jvp_fails_once_with_the_signature_to_write(service, tmp_path):
    source = """\
    import torch


    class ScaledDot(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, y, scale):
            ctx.save_for_backward(x, y)
            ctx.scale = scale
            return scale * (x * y).sum(-1)

        @staticmethod
        def backward(ctx, g):
            x, y = ctx.saved_tensors
            g = ctx.scale * g.unsqueeze(-1)
            return g * y, g * x, None
    """
    stage, message, mistake = first_failure(check(service, tmp_path, "dot_jvp", source))
    assert (stage, mistake) == ("jvp", "no_jvp")
    assert "`jvp(ctx, *tangents)`" in message and "(for" not in message


# 4. A backward that is itself differentiable: log-sum-exp -----------------------------------


def test_a_backward_that_recomputes_the_softmax_from_x_alone_passes_both_second_order_stages(
    service, tmp_path
):
    source = """\
    import torch


    class LogSumExp(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return torch.logsumexp(x, dim=-1)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g[..., None] * torch.softmax(x, dim=-1)
    """
    report = check(service, tmp_path, "logsumexp", source)
    passes(report)
    assert stage_verdict(report, "second_order") is Verdict.PASS
    assert stage_verdict(report, "double_backward") is Verdict.PASS


def test_a_backward_through_numpy_cannot_be_differentiated_again(service, tmp_path):
    source = """\
    import numpy as np
    import torch


    class LogSumExp(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = torch.logsumexp(x, dim=-1)
            ctx.save_for_backward(x, y)
            return y

        @staticmethod
        def backward(ctx, g):
            x, y = ctx.saved_tensors
            p = np.exp(x.detach().numpy() - y.detach().numpy()[..., None])
            return g[..., None] * torch.from_numpy(p)
    """
    stage, message, mistake = first_failure(check(service, tmp_path, "logsumexp", source))
    assert (stage, mistake) == ("second_order", "second_order_wrong")
    assert "the second derivative with respect to `x` is wrong" in message


def test_the_second_derivatives_stage_also_runs_on_request_for_any_exercise(service, tmp_path):
    source = """\
    import torch


    class MySigmoid(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = torch.sigmoid(x)
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return g.detach() * y * (1 - y)
    """
    report = check(service, tmp_path, "sigmoid", source, double_backward=True)
    stage, message, mistake = first_failure(report)
    assert (stage, mistake) == ("second_order", "grad_output_detached")
    assert "with respect to grad_output" in message


# 5. vmap: L2 normalisation --------------------------------------------------------------------


def test_a_handwritten_vmap_rule_that_moves_the_batch_dim_first_passes(service, tmp_path):
    source = """\
    import torch


    class Normalize(torch.autograd.Function):
        @staticmethod
        def forward(x):
            return torch.nn.functional.normalize(x, dim=-1, eps=0.0)

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(output, inputs[0].norm(dim=-1, keepdim=True))

        @staticmethod
        def backward(ctx, g):
            y, n = ctx.saved_tensors
            return (g - y * torch.einsum("...d,...d->...", y, g)[..., None]) / n

        @staticmethod
        def vmap(info, in_dims, x):
            return Normalize.apply(x.movedim(in_dims[0], 0)), 0
    """
    report = check(service, tmp_path, "normalize_vmap", source)
    passes(report)
    assert stage_verdict(report, "vmap") is Verdict.PASS


def test_a_branch_on_tensor_values_in_backward_fails_under_vmap_naming_the_line(service, tmp_path):
    source = """\
    import torch


    class Normalize(torch.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(x):
            return x / x.norm(dim=-1, keepdim=True)

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0], output)

        @staticmethod
        def backward(ctx, g):
            x, y = ctx.saved_tensors
            n = x.norm(dim=-1, keepdim=True)
            if (n < 1e-12).any():
                n = n.clamp_min(1e-12)
            return (g - y * (y * g).sum(-1, keepdim=True)) / n
    """
    report = check(service, tmp_path, "normalize_vmap", source)
    stage, message, mistake = first_failure(report)
    assert (stage, mistake) == ("vmap", "not_batchable")
    assert "data-dependent control flow" in message
    failed = report.first_failure
    assert failed is not None
    assert any("if (n < 1e-12).any():" in d for d in failed.details)


def test_the_learners_vector_jacobian_is_torchs_grad_and_stays_differentiable():
    """In-process: the shortcut to autograd's engine (both sides use it) gives what
    ``torch.autograd.grad`` gives, first and second order, and falls back to it (and
    its words) when an upstream gradient does not fit its output."""
    from trainer.checking.vjp import vector_jacobian

    generator = torch.Generator().manual_seed(0)
    x = torch.randn(3, 4, dtype=torch.float64, generator=generator, requires_grad=True)
    w = torch.randn(4, dtype=torch.float64, generator=generator, requires_grad=True)
    upstream = [torch.randn(3, dtype=torch.float64, generator=generator).requires_grad_()]
    outputs = [torch.tanh(x @ w).exp()]
    got = vector_jacobian(outputs, [x, w], upstream, create_graph=True)
    want = torch.autograd.grad(outputs, [x, w], upstream, create_graph=True)
    for g, e in zip(got, want, strict=True):
        assert g is not None and torch.equal(g, e) and g.requires_grad
    got_total = torch.stack([g.sum() for g in got if g is not None]).sum()
    second_got = torch.autograd.grad(got_total, [x, w, *upstream], retain_graph=True)
    want_total = torch.stack([e.sum() for e in want]).sum()
    second_want = torch.autograd.grad(want_total, [x, w, *upstream])
    assert all(torch.equal(g, e) for g, e in zip(second_got, second_want, strict=True))
    unused = torch.zeros(2, dtype=torch.float64, requires_grad=True)
    assert vector_jacobian(outputs, [unused], upstream, allow_unused=True) == (None,)
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        vector_jacobian(outputs, [x], [torch.ones(4, dtype=torch.float64)])


def test_differentiating_a_backward_twice_does_not_import_sympy_in_the_learners_process(
    monkeypatch: pytest.MonkeyPatch,
):
    """torch.autograd.grad with grad_outputs checks them with torch's symbolic shapes,
    which import sympy on first use (~0.25 s in every learner process of a second-order
    stage); the shortcut never gets there."""
    import torch.autograd

    from trainer.checking.vjp import vector_jacobian

    def checks_shapes(*args: object, **kwargs: object) -> None:
        raise AssertionError("torch.autograd.grad checked the upstream gradients")

    monkeypatch.setattr(torch.autograd, "_make_grads", checks_shapes)
    x = torch.randn(5, dtype=torch.float64, requires_grad=True)
    u = torch.randn(5, dtype=torch.float64, requires_grad=True)
    (g,) = vector_jacobian([x.sin()], [x], [u], create_graph=True)
    assert g is not None and torch.allclose(g, x.cos() * u)
    with pytest.raises(AssertionError, match="checked the upstream"):
        torch.autograd.grad(x.sin(), [x], [u])  # the path the shortcut avoids
