"""Verdict truth, round three: state that training really has, legal Functions that
must pass, and reports that name the real mistake.

Each wrong file is one a learner writes; each right file is an odd but legal style.
"""

from __future__ import annotations

import pytest
import torch

from tests.conftest import CATALOG
from tests.test_truth import check, first_failure, service

__all__ = ["service"]  # the fixture, shared with test_truth

# -- state that training really has ------------------------------------------------------------


def test_statistics_cached_by_shape_collide_when_two_calls_of_one_shape_share_a_graph(
    service, tmp_path
):
    """forward keeps its output in a cache keyed by (shape, dtype); backward reads it.
    Calls in a row and two calls of different shapes in one graph never collide; two
    calls of the same shape in one graph do. Remove the same-shape scenario and this
    file passes every stage."""
    source = """
        import torch

        CACHE = {}


        class MySigmoid(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                y = torch.sigmoid(x)
                CACHE[(tuple(y.shape), y.dtype)] = y
                return y

            @staticmethod
            def backward(ctx, grad_output):
                y = CACHE[(tuple(grad_output.shape), grad_output.dtype)]
                return grad_output * y * (1 - y)
    """
    stage, message, mistake = first_failure(check(service, tmp_path, "sigmoid", source))
    assert (stage, mistake) == ("state", "state_outside_ctx"), message
    assert "two calls of the same shape in one graph" in message


def test_a_cache_keyed_by_the_weight_breaks_when_two_calls_share_the_weight(service, tmp_path):
    """Tied weights: forward keeps x in a cache keyed by id(weight). Remove the shared
    parameter scenario and this file passes every stage."""
    source = """
        import torch

        INPUTS = {}


        class MyLinearFunction(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, weight, bias):
                INPUTS[id(weight)] = x
                ctx.save_for_backward(weight)
                ctx.key = id(weight)
                return x @ weight.T + bias

            @staticmethod
            def backward(ctx, grad_output):
                (weight,) = ctx.saved_tensors
                x = INPUTS[ctx.key]
                return grad_output @ weight, grad_output.T @ x, grad_output.sum(0)
    """
    stage, message, mistake = first_failure(check(service, tmp_path, "linear", source))
    assert (stage, mistake) == ("state", "state_outside_ctx"), message
    assert "shared by two calls in one graph" in message


def test_a_right_linear_passes_with_its_weight_shared_by_two_calls(service, tmp_path):
    source = """
        import torch


        class MyLinearFunction(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, weight, bias):
                ctx.save_for_backward(x, weight)
                return x @ weight.T + bias

            @staticmethod
            def backward(ctx, grad_output):
                x, weight = ctx.saved_tensors
                return grad_output @ weight, grad_output.T @ x, grad_output.sum(0)
    """
    report = check(service, tmp_path, "linear", source)
    assert report.passed, report.first_failure


def test_a_formula_wrong_for_some_inputs_is_not_blamed_on_state(service, tmp_path):
    """Wrong, every time, for some inputs only (here: those the state stage draws, with
    a negative first element, in float64): a fresh copy of the file is wrong for them
    too, so the message says the gradient is wrong for such inputs, never that state is
    kept between calls. Make the fresh-copy check answer "right" and this test fails."""
    source = """
        import torch


        class MySigmoid(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                y = torch.sigmoid(x)
                ctx.save_for_backward(x, y)
                return y

            @staticmethod
            def backward(ctx, grad_output):
                x, y = ctx.saved_tensors
                slope = y * (1 - y)
                if x.dtype == torch.float64 and x.numel() == 7 and float(x[0]) < -0.5:
                    slope = slope * 1.5
                return grad_output * slope
    """
    stage, message, mistake = first_failure(check(service, tmp_path, "sigmoid", source))
    assert stage == "state" and mistake != "state_outside_ctx", (stage, message, mistake)
    assert "not state kept between calls" in message, message
    assert "cache" not in message


# -- legal Functions pass ------------------------------------------------------------------------


def test_extra_trailing_nones_for_optional_parameters_are_legal(service, tmp_path):
    """forward(ctx, x, dim, dtype=None) with backward returning (grad, None, None):
    autograd drops trailing Nones, and so must the contract stage."""
    source = """
        import torch


        class MySoftmax(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, dim, dtype=None):
                y = torch.softmax(x if dtype is None else x.to(dtype), dim)
                ctx.save_for_backward(y)
                ctx.dim = dim
                return y

            @staticmethod
            def backward(ctx, grad_output):
                (y,) = ctx.saved_tensors
                dot = (grad_output * y).sum(ctx.dim, keepdim=True)
                return y * (grad_output - dot), None, None
    """
    report = check(service, tmp_path, "softmax", source)
    assert report.passed, report.first_failure


@pytest.mark.parametrize(
    ("returned", "words"),
    [
        (
            "y * (grad_output - dot)",
            "backward returned 1 value but forward is called with 2 inputs",
        ),
        (
            "y * (grad_output - dot), None, y",
            "backward returned 3 values but forward is called with 2 inputs",
        ),
    ],
    ids=["too few", "a tensor past the inputs"],
)
def test_a_wrong_count_is_named_with_forwards_real_inputs(service, tmp_path, returned, words):
    source = f"""
        import torch


        class MySoftmax(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, dim):
                y = torch.softmax(x, dim)
                ctx.save_for_backward(y)
                ctx.dim = dim
                return y

            @staticmethod
            def backward(ctx, grad_output):
                (y,) = ctx.saved_tensors
                dot = (grad_output * y).sum(ctx.dim, keepdim=True)
                return {returned}
    """
    failed = check(service, tmp_path, "softmax", source).first_failure
    assert failed is not None
    text = " ".join([failed.message, *failed.details])
    assert words in text, text


# -- reports that name the real mistake ------------------------------------------------------


@pytest.mark.parametrize(
    ("forward_saves", "backward_reads", "saved"),
    [
        ("", "(y,) = ctx.saved_tensors", "nothing"),
        ("", "y = ctx.saved_tensors[0]", "nothing"),
        ("ctx.save_for_backward(y)", "y, x = ctx.saved_tensors", "1 tensor"),
    ],
    ids=["unpacks nothing", "indexes nothing", "unpacks more"],
)
def test_forgetting_save_for_backward_is_named(
    service, tmp_path, forward_saves, backward_reads, saved
):
    """The commonest beginner bug gets its name, not "not enough values to unpack"."""
    source = f"""
        import torch


        class MySigmoid(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                y = torch.sigmoid(x)
                {forward_saves or "pass"}
                return y

            @staticmethod
            def backward(ctx, grad_output):
                {backward_reads}
                return grad_output * y * (1 - y)
    """
    stage, message, _ = first_failure(check(service, tmp_path, "sigmoid", source))
    assert stage == "backward", message
    assert f"reads more from ctx.saved_tensors than forward saved ({saved})" in message, message
    assert "ctx.save_for_backward(" in message


def test_a_softmax_without_the_max_shift_is_named_0_over_0(service, tmp_path):
    source = """
        import torch


        class MySoftmax(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, dim):
                e = torch.exp(x)
                y = e / e.sum(dim, keepdim=True)
                ctx.save_for_backward(y)
                ctx.dim = dim
                return y

            @staticmethod
            def backward(ctx, grad_output):
                (y,) = ctx.saved_tensors
                return y * (grad_output - (grad_output * y).sum(ctx.dim, keepdim=True)), None
    """
    stage, message, _ = first_failure(check(service, tmp_path, "softmax", source))
    assert stage == "stability", message
    assert "nan" in message and "0/0" in message, message


def test_a_softplus_that_overflows_is_named_an_overflow(service, tmp_path):
    source = """
        import torch


        class MySoftplus(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return torch.log(1 + torch.exp(x))

            @staticmethod
            def backward(ctx, grad_output):
                (x,) = ctx.saved_tensors
                return grad_output * torch.sigmoid(x)
    """
    stage, message, _ = first_failure(check(service, tmp_path, "softplus", source))
    assert stage == "stability", message
    assert "inf" in message and "an overflow" in message, message


class _Run:
    """What ``stability._reason`` reads of a run: its arguments and dtype."""

    def __init__(self, x: torch.Tensor, dtype: torch.dtype) -> None:
        self.args = (x,)
        self.dtype = dtype


def _reason_for(x: torch.Tensor, expected: torch.Tensor, got: torch.Tensor) -> str:
    from trainer.checking.trusted.compare import Mismatch
    from trainer.checking.trusted.stability import _reason

    wrong = (got - expected).abs() > 1e-6 * (1 + expected.abs())
    mismatch = Mismatch("grad for `x` is wrong", wrong=wrong)
    return _reason(_Run(x, got.dtype), mismatch, x.shape, (expected, got))  # type: ignore[arg-type]


def test_the_domain_reason_is_the_one_the_evidence_supports():
    x = torch.tensor([-60.0, -2.0, -0.5, 0.0, 0.5, 2.0, 60.0, 80.0], dtype=torch.float64)
    expected = torch.sigmoid(x) * (1 - torch.sigmoid(x))

    large = expected.clone()
    large[x.abs() > 50] = 0.5  # a shortcut for large inputs
    assert "only at large inputs" in _reason_for(x, expected, large)

    tied = torch.tensor([1.0, 3.0, 3.0, -2.0, 0.5, 0.7], dtype=torch.float64)
    wrong_at_ties = tied.clone()
    wrong_at_ties[1:3] = torch.tensor([3.0, 0.0])  # both to the first, say, of a tie
    assert "only where inputs are equal" in _reason_for(
        tied, torch.tensor([1.0, 1.5, 1.5, -2.0, 0.5, 0.7], dtype=torch.float64), wrong_at_ties
    )

    offset = torch.linspace(299.0, 301.0, 8, dtype=torch.float32)
    truth = torch.linspace(-1.0, 1.0, 8, dtype=torch.float32)
    assert "cancellation" in _reason_for(offset, truth, truth * 1.01)

    scattered = expected.clone()
    scattered[2] = 1.0  # wrong at a small input, badly: no evidence for any reason
    assert _reason_for(x, expected, scattered) == ""


def test_running_out_of_memory_on_a_materialised_jacobian_says_so(service, tmp_path):
    """A softmax backward that builds each row's Jacobian (diag_embed − y yᵀ) runs out of
    memory on a (100, 1000) case under a 256 MiB cap: the message names the Jacobian,
    not only the memory."""
    from tests.conftest import CATALOG
    from trainer.checking.runner import run_check

    path = tmp_path / "softmax.py"
    path.write_text(
        "import torch\n\n\n"
        "class MySoftmax(torch.autograd.Function):\n"
        "    @staticmethod\n"
        "    def forward(ctx, x, dim):\n"
        "        y = torch.softmax(x, dim)\n"
        "        ctx.save_for_backward(y)\n"
        "        ctx.dim = dim\n"
        "        return y\n\n"
        "    @staticmethod\n"
        "    def backward(ctx, grad_output):\n"
        "        (y,) = ctx.saved_tensors\n"
        "        yl, gl = y.movedim(ctx.dim, -1), grad_output.movedim(ctx.dim, -1)\n"
        "        jac = torch.diag_embed(yl) - yl.unsqueeze(-1) * yl.unsqueeze(-2)\n"
        "        return (jac @ gl.unsqueeze(-1)).squeeze(-1).movedim(-1, ctx.dim), None\n"
    )
    report = run_check(CATALOG.get("softmax"), path, service=service, memory_limit_mb=256)
    failed = report.first_failure
    assert failed is not None and failed.id == "backward", report.stages
    assert "ran out of memory" in failed.message and "materialised Jacobian" in failed.message


def test_a_float64_mismatch_shows_the_digits_that_differ():
    from trainer.checking.trusted.compare import compare_tensor
    from trainer.spec import Tolerance

    expected = torch.tensor([-0.0423668012], dtype=torch.float64)
    got = torch.tensor([-0.0423667512], dtype=torch.float64)
    mismatch = compare_tensor("grad", expected, got, Tolerance(rtol=1e-7, atol=1e-9))
    assert mismatch is not None
    assert "expected -0.04236680, got -0.04236675" in mismatch.detail, mismatch.detail


def test_an_error_map_with_every_element_wrong_says_so():
    from trainer.checking.trusted.pictures import _map_pattern

    want = torch.ones(3, 3)
    have = torch.rand(3, 3) + 2.0
    wrong = torch.ones(3, 3, dtype=torch.bool)
    seen = _map_pattern(want, have, want.shape, have.shape, wrong, "unknown")
    assert seen.startswith("wrong at every element (9 of 9)"), seen
    columns = wrong.clone()
    columns[:, 1] = False
    assert _map_pattern(want, have, want.shape, have.shape, columns, "unknown").startswith(
        "whole columns wrong (2 of 3)"
    )


def test_the_forward_failure_shown_first_is_the_largest(service, tmp_path):
    """A float64 rounding slip in the first run and an error of 3.0 in a later one: the
    report leads with the 3.0 (an ignored mask, say), not with the slip."""
    source = """
        import torch


        class MySigmoid(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                y = torch.sigmoid(x)
                if x.dim() == 1 and x.dtype == torch.float64:
                    y = y + 1e-6
                if x.dim() == 3:
                    y = y + 3.0
                ctx.save_for_backward(y)
                return y

            @staticmethod
            def backward(ctx, grad_output):
                (y,) = ctx.saved_tensors
                return grad_output * y * (1 - y)
    """
    stage, message, _ = first_failure(check(service, tmp_path, "sigmoid", source))
    assert stage == "forward", message
    assert "(2, 3, 4)" in message, message


def test_a_kink_failure_far_from_the_kink_is_not_called_close_to_it(service, tmp_path):
    """A ReLU whose slope doubles above 0.5: in the kink stage the worst element is about
    2 away from the kink at 0, which is not "close to the kink"."""
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
                slope = (x > 0).to(grad_output.dtype)
                return grad_output * torch.where(x > 0.5, 2 * slope, slope)
    """
    report = check(service, tmp_path, "relu", source)
    kinks = next(s for s in report.stages if s.id == "kinks")
    assert kinks.verdict.value == "fail"
    assert kinks.message.startswith("away from the kinks"), kinks.message
    assert "close to the kink" not in kinks.message
    assert (kinks.diagnosis or {}).get("mistake") != "near_kink"


def test_a_nan_gradient_where_the_reference_is_finite_is_named_in_backward_parity():
    """Backward parity names it as the domain stage does (it was "none of the classic
    mistakes"). Take ``_non_finite`` out of ``diagnosis.VALUE_RULES`` and this fails."""
    from trainer.checking.trusted.diagnosis import classify

    want = torch.tensor([0.5, -1.0, 0.0])
    mistake, words = classify(want, torch.tensor([0.5, float("nan"), 0.0]))
    assert mistake == "non_finite" and "nan" in words and "0/0" in words
    assert classify(want, torch.tensor([0.5, float("inf"), 0.0]))[0] == "non_finite"
    assert classify(want, want * 2)[0] == "constant_factor"  # finite mistakes keep their names


def test_a_right_answer_passes_gradcheck_where_the_reference_is_nan():
    """A small case where every row is ignored: torch's loss is nan (a mean over no row)
    and its gradient 0. Finite differences of a nan are nan whatever backward returns,
    so gradcheck leaves such runs out. Remove the ``_finite`` filter of
    ``Plan.gradcheck_runs`` and this right answer fails gradcheck."""
    from tests.conftest import CATALOG, REPO, shared_service
    from trainer.checking.runner import run_check
    from trainer.spec import exercise_from_mapping

    base = CATALOG.get("label_smoothing_ce")
    cases = [
        *base.data["cases"],
        {"logits": [3, 1], "target": [3], "label_smoothing": 0.1, "ignore_index": 0},
    ]
    exercise = exercise_from_mapping(
        {**base.data, "cases": cases}, "label_smoothing_ce.yaml", base.source
    )
    report = run_check(
        exercise,
        REPO / "solutions" / "label_smoothing_ce.py",
        service=shared_service(),
        catalogue_file=True,
    )
    assert report.passed, report.first_failure


def test_a_right_kl_div_passes_where_its_target_is_exactly_zero():
    """The domain stage's rounding allowance moves each input one rounding step both
    ways: a target of exactly 0 moved below its domain made the reference's t·log t nan
    there, and the nan allowance failed this right answer. Take ``plan._in_domain`` (which
    keeps the moves in the domain) out and this fails."""
    from tests.conftest import CATALOG, REPO, shared_service
    from trainer.checking.runner import run_check

    exercise = CATALOG.get("kl_div")
    assert exercise.reference == 'F.kl_div(input, target, reduction="batchmean")'
    report = run_check(
        exercise, REPO / "solutions" / "kl_div.py", service=shared_service(), catalogue_file=True
    )
    assert report.passed, report.first_failure


# -- needs_input_grad: which subsets of inputs requiring grad are tried ---------------------


def test_every_subset_is_tried_on_one_run_and_each_input_alone_or_left_out_on_the_rest():
    from trainer.checking.trusted.contract import _exhaustive_runs, _subsets
    from trainer.checking.trusted.plan import build_plan

    names = ["x", "W1", "b1", "W2", "b2"]
    assert len(_subsets(names, every=True)) == 2**5 - 2
    assert set(_subsets(names, every=False)) == {(n,) for n in names} | {
        tuple(n for n in names if n != left) for left in names
    }
    runs = build_plan(CATALOG.get("mlp"), seed=0).runs
    chosen = [runs[i] for i in _exhaustive_runs(runs)]
    assert len(chosen) == 1 and chosen[0].dtype == torch.float64
    assert chosen[0].numel == min(r.numel for r in runs if r.dtype == torch.float64)


def test_a_branch_wrong_only_for_two_of_five_inputs_requiring_grad_fails_the_contract(
    service, tmp_path
):
    """grad_b1 is right unless x and b1 are the only inputs requiring grad: neither an
    input alone nor all but one shows it. Try each input alone and each left out on
    every run only (no run with every subset), and this file passes."""
    reference = CATALOG.solution_path(CATALOG.get("mlp")).read_text(encoding="utf-8")
    source = reference.replace(
        "grad_b1 = grad_pre.sum(dim=0)  # (H,)",
        "grad_b1 = grad_pre.sum(dim=0)\n"
        "        if ctx.needs_input_grad[:5] == (True, False, True, False, False):\n"
        "            grad_b1 = 2 * grad_b1",
    )
    assert source != reference
    stage, message, mistake = first_failure(check(service, tmp_path, "mlp", source))
    assert (stage, mistake) == ("contract", "needs_input_grad"), message
    assert "with only `x` and `b1` requiring grad" in message


@pytest.mark.parametrize("ignored", [1, 2])
def test_a_backward_that_ignores_either_upstream_gradient_is_named(service, tmp_path, ignored):
    """Each output's upstream gradient left out is a known wrong gradient of its own: the
    plan kept only the last output's (ignoring grad_out1 matched none of the mistakes)."""
    reference = CATALOG.solution_path(CATALOG.get("two_output")).read_text(encoding="utf-8")
    term = "grad_out1" if ignored == 1 else "grad_out2"
    source = reference.replace(f"* {term}", "* 0")
    assert source != reference
    stage, message, mistake = first_failure(check(service, tmp_path, "two_output", source))
    assert (stage, mistake) == ("backward", "ignores_an_upstream"), message
    assert f"grad_out{ignored} is ignored" in message
