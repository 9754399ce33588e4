"""Verdict truth: for each class of learner file that used to fool the checker, a wrong
file that fails for the stated reason and a right file, written in an odd style, that passes.

All checks share one warm checking server, as grading does: the path is the
same as a cold check's (a cold check is a server started for one job).
"""

from __future__ import annotations

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


def check(service: CheckingService, tmp_path: Path, exercise: str, source: str) -> CheckReport:
    path = tmp_path / f"{exercise}.py"
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return run_check(CATALOG.get(exercise), path, service=service)


def first_failure(report: CheckReport) -> tuple[str, str, str]:
    failed = report.first_failure
    assert failed is not None, [(s.id, s.verdict, s.message) for s in report.stages]
    mistake = (failed.diagnosis or {}).get("mistake", "")
    return failed.id, failed.message, str(mistake)


def passes(report: CheckReport) -> None:
    assert report.passed, [(s.id, s.message) for s in report.stages if s.verdict is Verdict.FAIL]


SIGMOID = """\
import torch


class MySigmoid(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        {forward}

    @staticmethod
    def backward(ctx, grad_output):
        {backward}
"""


def sigmoid(forward: str, backward: str) -> str:
    indent = "\n        "
    return SIGMOID.format(
        forward=indent.join(textwrap.dedent(forward).strip().splitlines()),
        backward=indent.join(textwrap.dedent(backward).strip().splitlines()),
    )


SAVES_OUTPUT = """
    y = torch.sigmoid(x)
    ctx.save_for_backward(y)
    return y
"""
RIGHT_BACKWARD = """
    (y,) = ctx.saved_tensors
    return grad_output * y * (1 - y)
"""


# 1. The whole domain ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("forward", "backward", "words"),
    [
        pytest.param(
            """
            y = torch.sigmoid(x.clamp(-10, 10))
            ctx.save_for_backward(y)
            return y
            """,
            RIGHT_BACKWARD,
            "the output is wrong",
            id="a clamp in forward",
        ),
        pytest.param(
            "ctx.save_for_backward(x)\nreturn torch.sigmoid(x)",
            """
            (x,) = ctx.saved_tensors
            y = torch.sigmoid(x)
            d = torch.where(x.abs() > 15, torch.zeros_like(y), y * (1 - y))
            return grad_output * d
            """,
            "grad for `x` is wrong",
            id="a fast path for large inputs",
        ),
    ],
)
def test_a_formula_right_only_near_zero_fails_across_the_domain_naming_the_input(
    service, tmp_path, forward, backward, words
):
    stage, message, mistake = first_failure(
        check(service, tmp_path, "sigmoid", sigmoid(forward, backward))
    )
    assert stage == "stability"
    assert mistake == "wrong_on_domain"
    assert words in message and "x[" in message and "large magnitudes" in message


def test_a_backward_that_clips_grad_output_fails_naming_the_size_of_grad_output(service, tmp_path):
    backward = """
        (y,) = ctx.saved_tensors
        return grad_output.clamp(-10, 10) * y * (1 - y)
    """
    stage, message, mistake = first_failure(
        check(service, tmp_path, "sigmoid", sigmoid(SAVES_OUTPUT, backward))
    )
    assert (stage, mistake) == ("stability", "scales_grad_output")
    assert "|grad_output| >" in message


@pytest.mark.parametrize(
    ("condition", "where"),
    [
        pytest.param("(x > 1e-3) & (x < ctx.clip_val)", "above", id="a dead zone above 0"),
        pytest.param("(x > 0) & (x < ctx.clip_val - 1e-4)", "below", id="a margin inside clip_val"),
    ],
)
def test_a_mask_that_switches_beside_the_kink_fails_close_to_it(
    service, tmp_path, condition, where
):
    source = f"""\
    import torch


    class ClippedReLUFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, input_tensor, clip_val):
            ctx.save_for_backward(input_tensor)
            ctx.clip_val = clip_val
            return torch.clamp(input_tensor, 0, clip_val)

        @staticmethod
        def backward(ctx, grad_output):
            (x,) = ctx.saved_tensors
            return grad_output * ({condition}), None
    """
    stage, message, mistake = first_failure(check(service, tmp_path, "clipped_relu", source))
    assert (stage, mistake) == ("kinks", "near_kink")
    assert f"{where})" in message and "close to the kink" in message


def test_a_right_clipped_relu_with_either_convention_at_the_kinks_passes(service, tmp_path):
    source = """\
    import torch


    class ClippedReLUFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, input_tensor, clip_val):
            ctx.save_for_backward(input_tensor)
            ctx.clip_val = clip_val
            return input_tensor.clamp(min=0).clamp(max=clip_val)

        @staticmethod
        def backward(ctx, grad_output):
            (x,) = ctx.saved_tensors
            inside = (x >= 0) & (x <= ctx.clip_val)
            return grad_output.masked_fill(~inside, 0), None
    """
    passes(check(service, tmp_path, "clipped_relu", source))


@pytest.mark.parametrize(
    ("backward", "why"),
    [
        pytest.param(
            """
            (y,) = ctx.saved_tensors
            if y.dim() == 4:
                return grad_output * 0.25
            return grad_output * y * (1 - y)
            """,
            "a 4-D input falls back to another path",
            id="a branch on the rank",
        ),
        pytest.param(
            """
            (y,) = ctx.saved_tensors
            if y.numel() > 10_000:
                return grad_output * y
            return grad_output * y * (1 - y)
            """,
            "a large tensor takes a shortcut",
            id="a branch on the size",
        ),
    ],
)
def test_a_sigmoid_right_only_for_the_shapes_a_test_might_use_fails(
    service, tmp_path, backward, why
):
    report = check(service, tmp_path, "sigmoid", sigmoid(SAVES_OUTPUT, backward))
    assert not report.passed, why
    stage, _, _ = first_failure(report)
    assert stage in ("backward", "stability"), why


SOFTMAX = """\
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
        dim = {dim}
        inner = (grad_output * y).sum(dim=dim, keepdim=True)
        return y * (grad_output - inner), None
"""


def test_a_softmax_that_treats_a_negative_dim_as_the_last_one_fails(service, tmp_path):
    wrong = SOFTMAX.format(dim="ctx.dim if ctx.dim >= 0 else -1")
    stage, _, _ = first_failure(check(service, tmp_path, "softmax", wrong))
    assert stage == "backward"


def test_a_softmax_that_normalises_a_negative_dim_itself_passes(service, tmp_path):
    right = SOFTMAX.format(dim="ctx.dim % y.dim()")
    passes(check(service, tmp_path, "softmax", right))


def test_a_cross_entropy_with_a_hard_coded_class_count_fails(service, tmp_path):
    source = """\
    import torch
    import torch.nn.functional as F


    class MyCrossEntropy(torch.autograd.Function):
        @staticmethod
        def forward(ctx, logits, target):
            ctx.save_for_backward(logits, target)
            return F.cross_entropy(logits, target)

        @staticmethod
        def backward(ctx, grad_output):
            logits, target = ctx.saved_tensors
            probs = torch.softmax(logits, dim=1)
            onehot = F.one_hot(target, 5).to(probs.dtype)  # five classes, as in the examples
            return grad_output * (probs - onehot) / logits.shape[0], None
    """
    report = check(service, tmp_path, "cross_entropy", textwrap.dedent(source))
    assert not report.passed


# 2. A Function is a pure function of ctx and its inputs -----------------------------------


@pytest.mark.parametrize(
    ("forward", "backward", "words"),
    [
        pytest.param(
            "y = torch.sigmoid(x)\nMySigmoid.saved = y\nreturn y",
            "y = MySigmoid.saved\nreturn grad_output * y * (1 - y)",
            "two calls in one graph",
            id="the output kept on the class",
        ),
        pytest.param(
            SAVES_OUTPUT,
            """
            (y,) = ctx.saved_tensors
            key = (tuple(y.shape), y.dtype)
            if key not in CACHE:
                CACHE[key] = y * (1 - y)
            return grad_output * CACHE[key]
            """,
            "fresh values",
            id="a derivative cached by shape",
        ),
        pytest.param(
            SAVES_OUTPUT,
            """
            COUNT.append(1)
            (y,) = ctx.saved_tensors
            if len(COUNT) > 300:
                return grad_output * 0.25
            return grad_output * y * (1 - y)
            """,
            "different gradient on call",
            id="a change after 300 calls",
        ),
        pytest.param(
            SAVES_OUTPUT,
            """
            COUNT.append(1)
            (y,) = ctx.saved_tensors
            return None if len(COUNT) == 250 else grad_output * y * (1 - y)
            """,
            "different gradient on call",
            id="no gradient on one call",
        ),
    ],
)
def test_a_backward_that_depends_on_state_outside_ctx_fails_naming_the_call(
    service, tmp_path, forward, backward, words
):
    source = "CACHE = {}\nCOUNT = []\n" + sigmoid(forward, backward)
    stage, message, mistake = first_failure(check(service, tmp_path, "sigmoid", source))
    assert (stage, mistake) == ("state", "state_outside_ctx")
    assert words in message


def test_the_gradients_of_calls_in_a_row_travel_stacked_and_come_back_call_by_call():
    """The learner's process sends the 500 calls' gradients as one tensor per input when
    they share a shape and dtype; anything else travels call by call, and a stacked reply
    that does not fit the calls is refused, never read."""
    from trainer.checking.learner.serve import _stacked
    from trainer.checking.trusted.proxy import LearnerFault
    from trainer.checking.trusted.training_calls import _unstacked

    calls = [[torch.full((2,), float(n)), torch.tensor(n)] for n in range(5)]
    stacked = _stacked(calls)
    assert stacked is not None and [t.shape for t in stacked] == [(5, 2), (5,)]
    back = _unstacked(stacked, 5)
    assert all(
        a is not None and torch.equal(a, b)
        for got, sent in zip(back, calls, strict=True)
        for a, b in zip(got, sent, strict=True)
    )
    assert _stacked([*calls, [torch.zeros(2, dtype=torch.float64), torch.tensor(5)]]) is None
    assert _stacked([*calls, [None, torch.tensor(5)]]) is None
    assert _stacked([*calls, [torch.zeros(3), torch.tensor(5)]]) is None
    for stacked_reply, count in [(stacked, 4), (stacked, "5"), ([torch.tensor(1.0)], 1), ("x", 1)]:
        with pytest.raises(LearnerFault, match="could not be read"):
            _unstacked(stacked_reply, count)


def test_a_formula_wrong_on_every_call_is_not_blamed_on_state(service, tmp_path):
    source = sigmoid(SAVES_OUTPUT, "(y,) = ctx.saved_tensors\nreturn y * (1 - y)\n")
    report = check(service, tmp_path, "sigmoid", source)
    assert first_failure(report)[0] == "backward"
    state = next(s for s in report.stages if s.id == "state")
    assert state.verdict is Verdict.FAIL
    assert "every one of the" in state.message and "as Backward parity shows" in state.message
    assert state.diagnosis is None  # not "something outside ctx": nothing is kept


TWO_OUTPUTS = """\
import torch


class MyCustomFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(x, y)
        return x * x + y * y, x * y

    @staticmethod
    def backward(ctx, grad_out1, grad_out2):
        x, y = ctx.saved_tensors
{body}
"""


def test_a_backward_that_cannot_take_a_missing_upstream_gradient_fails_when_one_output_is_used(
    service, tmp_path
):
    body = """\
        return 2 * x * grad_out1 + y * grad_out2, 2 * y * grad_out1 + x * grad_out2"""
    stage, message, mistake = first_failure(
        check(service, tmp_path, "two_output", TWO_OUTPUTS.format(body=body))
    )
    assert (stage, mistake) == ("state", "missing_upstream")
    assert "uses some outputs only" in message


def test_a_backward_that_handles_a_missing_upstream_gradient_passes(service, tmp_path):
    body = """\
        grad_x = torch.zeros_like(x)
        grad_y = torch.zeros_like(y)
        if grad_out1 is not None:
            grad_x = grad_x + 2 * x * grad_out1
            grad_y = grad_y + 2 * y * grad_out1
        if grad_out2 is not None:
            grad_x = grad_x + y * grad_out2
            grad_y = grad_y + x * grad_out2
        return grad_x, grad_y"""
    passes(check(service, tmp_path, "two_output", TWO_OUTPUTS.format(body=body)))


# 3. Derived by hand --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("backward", "call"),
    [
        pytest.param(
            """
            (x,) = ctx.saved_tensors
            with torch.enable_grad():
                x = x.detach().requires_grad_()
                (g,) = torch.autograd.grad(torch.sigmoid(x), x, grad_output)
            return g
            """,
            "autograd",
            id="torch.autograd.grad on a re-run forward",
        ),
        pytest.param(
            """
            (x,) = ctx.saved_tensors
            _, vjp = torch.func.vjp(torch.sigmoid, x)
            return vjp(grad_output)[0]
            """,
            "torch.func.vjp",
            id="torch.func.vjp",
        ),
        pytest.param(
            """
            (x,) = ctx.saved_tensors
            return torch.ops.aten.sigmoid_backward(grad_output, torch.sigmoid(x))
            """,
            "sigmoid_backward",
            id="torch's own backward kernel",
        ),
    ],
)
def test_a_backward_that_lets_torch_derive_the_gradient_fails_naming_the_call(
    service, tmp_path, backward, call
):
    forward = "ctx.save_for_backward(x)\nreturn torch.sigmoid(x)"
    stage, message, mistake = first_failure(
        check(service, tmp_path, "sigmoid", sigmoid(forward, backward))
    )
    assert (stage, mistake) == ("by_hand", "derived_by_torch")
    assert call in message and "derive the gradient yourself" in message


def test_vmap_used_as_a_loop_is_allowed(service, tmp_path):
    backward = """
        (y,) = ctx.saved_tensors
        one = lambda g, s: g * s * (1 - s)
        return torch.func.vmap(one)(grad_output.reshape(-1), y.reshape(-1)).reshape(y.shape)
    """
    passes(check(service, tmp_path, "sigmoid", sigmoid(SAVES_OUTPUT, backward)))


# 5. No false fails -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(
            sigmoid(
                SAVES_OUTPUT,
                """
                (y,) = ctx.saved_tensors
                out = torch.empty_like(y)
                torch.mul(y, 1 - y, out=out)
                return grad_output * out
                """,
            ),
            id="an out= kernel in backward (autograd runs backward with grad mode off)",
        ),
        pytest.param(
            "import torch\ntorch.set_default_dtype(torch.float32)\n"
            + sigmoid(SAVES_OUTPUT, RIGHT_BACKWARD),
            id="torch.set_default_dtype at import (torch rebinds torch.Storage itself)",
        ),
        pytest.param(
            sigmoid(
                SAVES_OUTPUT,
                """
                (y,) = ctx.saved_tensors
                local = torch.func.vmap(lambda s: s * (1 - s))(y)
                return grad_output * local
                """,
            ),
            id="torch.func in backward (torch rebinds torch.manual_seed itself)",
        ),
        pytest.param(
            sigmoid(SAVES_OUTPUT, RIGHT_BACKWARD).replace(
                "def backward(ctx, grad_output)", "def vjp(ctx, grad_output)"
            ),
            id="vjp, the documented alias of backward",
        ),
        pytest.param(
            sigmoid(SAVES_OUTPUT, RIGHT_BACKWARD).replace(
                "def forward(ctx, x)", "def forward(ctx, x, scale=1.0, *, label='sigmoid')"
            ),
            id="forward with extra parameters that have defaults",
        ),
    ],
)
def test_a_right_solution_in_an_unusual_style_passes(service, tmp_path, source):
    passes(check(service, tmp_path, "sigmoid", source))


# 6. Reports ------------------------------------------------------------------------------------


def test_the_same_error_in_several_stages_is_shown_once(service, tmp_path):
    backward = """
        raise ValueError("a mistake of mine")
    """
    report = check(service, tmp_path, "sigmoid", sigmoid(SAVES_OUTPUT, backward))
    failed = [s for s in report.stages if s.verdict is Verdict.FAIL]
    assert len(failed) > 2
    assert "a mistake of mine" in failed[0].message
    assert all(s.message == f"same error as {failed[0].title} above" for s in failed[1:]), [
        s.message for s in failed
    ]


def test_the_largest_errors_show_the_input_at_each_index(service, tmp_path):
    source = (
        Path(__file__).resolve().parent.parent
        / "solutions"
        / "wrong"
        / "clipped_relu"
        / "no_mask.py"
    ).read_text()
    report = check(service, tmp_path, "clipped_relu", source)
    backward = next(s for s in report.stages if s.id == "backward")
    lines = [line for line in backward.details if "expected" in line and "got" in line]
    assert lines and all("(at input_tensor = " in line for line in lines), backward.details
