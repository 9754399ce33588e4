"""The checker as a tutor: it catches what autograd hides and names the mistake."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

from tests.conftest import REPO, check_json, first_failure, stage
from trainer.checking.runner import run_check
from trainer.checking.trusted.diagnosis import classify
from trainer.spec import exercise_from_mapping

LINEAR_UNSUMMED_BIAS = """
import torch


class MyLinearFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(x, weight)
        return x @ weight.T + bias

    @staticmethod
    def backward(ctx, grad_output):
        x, weight = ctx.saved_tensors
        return grad_output @ weight, grad_output.T @ x, grad_output  # bias: not summed
"""

SIGMOID_IN_PLACE = """
import torch


class MySigmoid(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.sigmoid(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        return grad_output.mul_(y * (1 - y))  # writes into grad_output
"""


def _load_class(source: str, name: str, tmp_path: Path) -> Any:
    namespace: dict[str, Any] = {}
    exec(compile(source, str(tmp_path / "variant.py"), "exec"), namespace)
    return namespace[name]


def test_an_unsummed_bias_gradient_passes_gradcheck_but_fails_the_contract(write_file, tmp_path):
    function = _load_class(LINEAR_UNSUMMED_BIAS, "MyLinearFunction", tmp_path)
    inputs = tuple(
        torch.randn(*shape, dtype=torch.float64, requires_grad=True)
        for shape in ((4, 3), (2, 3), (2,))
    )
    assert torch.autograd.gradcheck(function.apply, inputs)  # autograd sums it silently

    code, report = check_json("linear", write_file("linear.py", LINEAR_UNSUMMED_BIAS))
    assert code == 1
    assert stage(report, "backward")["verdict"] == "pass"
    assert stage(report, "gradcheck")["verdict"] == "pass"
    contract = stage(report, "contract")
    assert contract["verdict"] == "fail"
    assert "grad for `bias` has shape (" in contract["message"]
    assert "but `bias` has shape (" in contract["message"]
    assert "sum over the batch dimension" in contract["message"]
    assert contract["diagnosis"]["mistake"] == "not_summed_over_batch"
    assert contract["diagnosis"]["input"] == "bias"


def test_modifying_grad_output_in_place_passes_gradcheck_but_fails_the_contract(
    write_file, tmp_path
):
    function = _load_class(SIGMOID_IN_PLACE, "MySigmoid", tmp_path)
    x = torch.randn(5, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(function.apply, (x,))

    code, report = check_json("sigmoid", write_file("sigmoid.py", SIGMOID_IN_PLACE))
    assert code == 1
    assert stage(report, "gradcheck")["verdict"] == "pass"
    contract = stage(report, "contract")
    assert contract["verdict"] == "fail"
    assert "modified grad_output in place" in contract["message"]
    assert contract["diagnosis"]["mistake"] == "in_place_grad_output"


def test_json_carries_the_diagnosis_with_the_input_name_and_a_compact_view(write_file):
    path = write_file(
        "sigmoid.py",
        """
        import torch


        class MySigmoid(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                y = torch.sigmoid(x)
                ctx.save_for_backward(y)
                return y

            @staticmethod
            def backward(ctx, grad_output):
                (y,) = ctx.saved_tensors
                return 2 * grad_output * y * (1 - y)
        """,
    )
    code, report = check_json("sigmoid", path)
    assert code == 1
    failure = first_failure(report)
    assert failure is not None and failure["id"] == "backward"
    diagnosis = failure["diagnosis"]
    assert diagnosis["mistake"] == "constant_factor"
    assert diagnosis["input"] == "x"
    assert "2 times" in failure["message"]
    assert 1 <= len(diagnosis["view"]) <= 5
    first = diagnosis["view"][0]
    assert set(first) == {"index", "expected", "got"}
    assert first["got"] == pytest.approx(2 * first["expected"], rel=1e-4)


def test_a_view_on_grad_output_fails_with_non_contiguous_gradients(write_file):
    path = write_file(
        "sigmoid.py",
        """
        import torch


        class MySigmoid(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                y = torch.sigmoid(x)
                ctx.save_for_backward(y)
                return y

            @staticmethod
            def backward(ctx, grad_output):
                (y,) = ctx.saved_tensors
                flat = grad_output.view(-1) * (y * (1 - y)).reshape(-1)
                return flat.view(y.shape)
        """,
    )
    code, report = check_json("sigmoid", path)
    assert code == 1
    contract = stage(report, "contract")
    assert contract["verdict"] == "fail"
    assert "stride-0" in contract["message"] or "non-contiguous" in contract["message"]
    assert ".reshape" in contract["message"] + " ".join(contract["details"])


def test_a_needs_input_grad_branch_with_the_wrong_index_fails_the_contract(write_file):
    path = write_file(
        "linear.py",
        """
        import torch


        class MyLinearFunction(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, weight, bias):
                ctx.save_for_backward(x, weight)
                return x @ weight.T + bias

            @staticmethod
            def backward(ctx, grad_output):
                x, weight = ctx.saved_tensors
                grad_x = grad_output @ weight if ctx.needs_input_grad[1] else None  # wrong index
                grad_weight = grad_output.T @ x if ctx.needs_input_grad[1] else None
                grad_bias = grad_output.sum(0) if ctx.needs_input_grad[2] else None
                return grad_x, grad_weight, grad_bias
        """,
    )
    code, report = check_json("linear", path)
    assert code == 1
    assert stage(report, "backward")["verdict"] == "pass"
    contract = stage(report, "contract")
    assert contract["verdict"] == "fail"
    assert "requiring grad" in contract["message"]
    assert "needs_input_grad" in contract["message"]
    assert contract["diagnosis"]["mistake"] == "needs_input_grad"


def test_a_wrong_value_exactly_at_the_clip_value_fails_the_kink_stage(write_file):
    path = write_file(
        "clipped_relu.py",
        """
        import torch


        class ClippedReLUFunction(torch.autograd.Function):
            @staticmethod
            def forward(ctx, input_tensor, clip_val):
                ctx.save_for_backward(input_tensor)
                ctx.clip_val = clip_val
                return input_tensor.clamp(0, clip_val)

            @staticmethod
            def backward(ctx, grad_output):
                (x,) = ctx.saved_tensors
                slope = ((x > 0) & (x < ctx.clip_val)).to(grad_output.dtype)
                slope = torch.where(x == ctx.clip_val, torch.full_like(slope, 3.0), slope)
                return grad_output * slope, None
        """,
    )
    code, report = check_json("clipped_relu", path)
    assert code == 1
    assert stage(report, "backward")["verdict"] == "pass"
    kinks = stage(report, "kinks")
    assert kinks["verdict"] == "fail"
    assert "kink" in kinks["message"] and "3 × grad_output" in kinks["message"]
    assert kinks["diagnosis"]["mistake"] == "kink_value"


@pytest.mark.parametrize(
    "bounds", [("> 0", "< c"), (">= 0", "<= c"), ("> 0", "<= c"), (">= 0", "< c")]
)
def test_either_convention_at_the_kinks_passes(bounds, write_file):
    low, high = bounds
    path = write_file(
        "clipped_relu.py",
        f"""
        import torch


        class ClippedReLUFunction(torch.autograd.Function):
            @staticmethod
            def forward(ctx, input_tensor, clip_val):
                ctx.save_for_backward(input_tensor)
                ctx.clip_val = clip_val
                return input_tensor.clamp(0, clip_val)

            @staticmethod
            def backward(ctx, grad_output):
                (x,) = ctx.saved_tensors
                c = ctx.clip_val
                return grad_output * ((x {low}) & (x {high})), None
        """,
    )
    code, report = check_json("clipped_relu", path)
    assert code == 0, first_failure(report)
    assert stage(report, "kinks")["verdict"] == "pass"


def _sigmoid_with(tmp_path: Path, **extra: Any) -> Any:
    data = yaml.safe_load((REPO / "exercises" / "sigmoid.yaml").read_text())
    data.update(extra)
    path = tmp_path / "exercises" / "sigmoid.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(yaml.safe_dump(data))
    return exercise_from_mapping(data, "exercises/sigmoid.yaml", source=path)


STABILITY = [
    {"dtype": "float32", "values": {"x": [-100.0, -30.0, 30.0, 100.0]}},
    {"dtype": "float64", "values": {"x": [-1000.0, 1000.0]}},
]


def test_an_unstable_backward_fails_the_stability_probe_naming_the_input(tmp_path, write_file):
    exercise = _sigmoid_with(tmp_path, stability=STABILITY)
    path = write_file(
        "sigmoid.py",
        """
        import torch


        class MySigmoid(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return torch.sigmoid(x)

            @staticmethod
            def backward(ctx, grad_output):
                (x,) = ctx.saved_tensors
                e = torch.exp(-x)
                return grad_output * e / (1 + e) ** 2
        """,
    )
    report = run_check(exercise, path)
    verdicts = {s.id: s.verdict.value for s in report.stages}
    assert verdicts["backward"] == "pass"
    assert verdicts["stability"] == "fail"
    failed = next(s for s in report.stages if s.id == "stability")
    assert "nan" in failed.message or "inf" in failed.message
    assert "x[0] = -100" in failed.message and "at [0]" in failed.message
    assert failed.diagnosis is not None and failed.diagnosis["mistake"] == "non_finite"


def test_a_stable_solution_passes_the_stability_probes(tmp_path):
    exercise = _sigmoid_with(tmp_path, stability=STABILITY)
    report = run_check(exercise, REPO / "solutions" / "sigmoid.py")
    assert report.passed, [(s.id, s.message) for s in report.stages]


def test_double_backward_passes_for_a_differentiable_backward_and_fails_for_a_detached_one(
    tmp_path, write_file
):
    exercise = _sigmoid_with(tmp_path, double_backward=True)
    good = run_check(exercise, REPO / "solutions" / "sigmoid.py")
    assert {s.id: s.verdict.value for s in good.stages}["double_backward"] == "pass"

    detached = write_file(
        "sigmoid.py",
        """
        import torch


        class MySigmoid(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                y = torch.sigmoid(x)
                ctx.save_for_backward(y)
                return y

            @staticmethod
            def backward(ctx, grad_output):
                (y,) = ctx.saved_tensors
                slope = (y * (1 - y)).detach()  # cuts the graph for second derivatives
                return grad_output * slope
        """,
    )
    bad = run_check(exercise, detached)
    assert {s.id: s.verdict.value for s in bad.stages}["double_backward"] == "fail"
    assert not bad.passed


def test_the_cuda_stage_is_a_visible_skip_without_a_gpu():
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the stage runs for real")
    code, report = check_json("sigmoid", REPO / "solutions" / "sigmoid.py")
    assert code == 0
    cuda = stage(report, "cuda")
    assert cuda["verdict"] == "skip"
    assert cuda["message"].startswith("skipped: no GPU")


def test_advice_notes_do_not_fail_a_correct_check(write_file):
    path = write_file(
        "linear.py",
        """
        import torch


        class MyLinearFunction(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, weight, bias):
                ctx.save_for_backward(x, weight, bias)  # bias is not needed
                ctx.kept = x  # a tensor stashed on ctx
                return x @ weight.T + bias

            @staticmethod
            def backward(ctx, grad_output):
                x, weight, _ = ctx.saved_tensors
                return grad_output @ weight, grad_output.T @ x, grad_output.sum(0)
        """,
    )
    code, report = check_json("linear", path)
    assert code == 0, first_failure(report)
    notes = " ".join(report["notes"])
    assert "ctx.kept" in notes and "save_for_backward" in notes
    assert "where the reference solution saves" in notes


def test_float32_arithmetic_in_a_float64_backward_gets_a_note(write_file):
    path = write_file(
        "sigmoid.py",
        """
        import torch


        class MySigmoid(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                y = torch.sigmoid(x)
                ctx.save_for_backward(y)
                return y

            @staticmethod
            def backward(ctx, grad_output):
                (y,) = ctx.saved_tensors
                return (grad_output.float() * (y * (1 - y)).float()).to(grad_output.dtype)
        """,
    )
    _, report = check_json("sigmoid", path)
    assert any("float32" in note and "`x`" in note for note in report["notes"]), report["notes"]


def test_a_lean_solution_gets_no_advice():
    code, report = check_json("linear", REPO / "solutions" / "linear.py")
    assert code == 0
    assert report["notes"] == []


# classify() on its own: one case per mistake -------------------------------------------------

TRUE = torch.tensor([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]], dtype=torch.float64)


@pytest.mark.parametrize(
    ("got", "mistake"),
    [
        (-TRUE, "sign_flipped"),
        (0.5 * TRUE, "constant_factor"),
        (torch.zeros_like(TRUE), "all_zeros"),
        (TRUE + torch.tensor([[0.1, 0, 0], [0, 0, 0.3]], dtype=torch.float64), "unknown"),
    ],
)
def test_classify_names_value_mistakes(got, mistake):
    assert classify(TRUE, got)[0] == mistake


def test_classify_names_a_transposed_gradient():
    square = torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.float64)
    assert classify(square, square.T)[0] == "transposed"
    assert classify(TRUE, TRUE.T)[0] == "transposed"


def test_classify_names_a_gradient_not_summed_over_the_batch():
    per_example = torch.randn(5, 3, dtype=torch.float64)
    assert classify(per_example.sum(0), per_example)[0] == "not_summed_over_batch"


def test_classify_names_a_backward_that_ignores_grad_output():
    local = torch.tensor([0.2, 0.1, 0.3], dtype=torch.float64)
    g1, g2 = torch.tensor([1.0, -2.0, 0.5]), torch.tensor([0.3, 0.7, -1.0])
    mistake, _ = classify(g1 * local, local, expected_other=g2 * local, got_other=local)
    assert mistake == "no_grad_output"


def test_classify_names_missing_and_inverted_masks():
    upstream = torch.tensor([1.0, -2.0, 0.5, 3.0], dtype=torch.float64)
    mask = torch.tensor([1.0, 0.0, 1.0, 0.0], dtype=torch.float64)
    assert classify(upstream * mask, upstream)[0] == "missing_mask"
    assert classify(upstream * mask, upstream * (1 - mask), upstream=upstream)[0] == "inverted_mask"
