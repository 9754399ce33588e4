"""Verdict truth, round three: state that training really has, legal Functions that
must pass, and reports that name the real mistake.

Each wrong file is one a learner writes; each right file is an odd but legal style.
"""

from __future__ import annotations

import pytest

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
