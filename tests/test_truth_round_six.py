"""Verdict truth, round six: inputs the spec allows that the draws never made. Each
file is one a learner writes (a slip, or a probe of what the checker draws), in our
own words; each test names the guard it proves."""

from __future__ import annotations

import torch

from tests.conftest import CATALOG
from tests.test_truth import check, first_failure, service, sigmoid

__all__ = ["service"]  # the fixture, shared with test_truth


def test_a_backward_wrong_only_for_non_contiguous_float32_inputs_fails_the_contract(
    service, tmp_path
):
    """Non-contiguous inputs were tried in float64 only. Remove ``_in_every_layout`` from
    the float32 runs (``_through_autograd`` returning at once for them) and this passes."""
    source = sigmoid(
        """
        y = torch.sigmoid(x)
        ctx.save_for_backward(y)
        ctx.odd = x.dtype == torch.float32 and not x.is_contiguous()
        return y
        """,
        """
        (y,) = ctx.saved_tensors
        slope = y * (1 - y)
        return -grad_output * slope if ctx.odd else grad_output * slope
        """,
    )
    stage, message, mistake = first_failure(check(service, tmp_path, "sigmoid", source))
    assert stage == "contract"
    assert "non-contiguous inputs" in message and "float32" in message
    assert mistake == "non_contiguous"


def test_a_backward_right_only_on_the_shapes_the_spec_lists_fails_the_domain(service, tmp_path):
    """A table of the spec's shapes, its cases' and its extreme probes' (public in the
    repository), and a wrong slope for any other. Remove the run of
    ``plan._unseen_rank`` from the domain runs and this passes."""
    sigmoid_spec = CATALOG.get("sigmoid")
    shapes = {v for c in sigmoid_spec.cases for v in c.values.values() if isinstance(v, tuple)}
    shapes |= {tuple(torch.tensor(p.values["x"]).shape) for p in sigmoid_spec.stability}
    source = sigmoid(
        """
        y = torch.sigmoid(x)
        ctx.save_for_backward(y)
        return y
        """,
        f"""
        (y,) = ctx.saved_tensors
        known = tuple(y.shape) in {sorted(shapes)!r}
        return grad_output * (y * (1 - y) if known else 1 - y)
        """,
    )
    stage, message, _ = first_failure(check(service, tmp_path, "sigmoid", source))
    assert stage == "stability"
    assert "a rank no case has" in message


def test_a_backward_wrong_on_evenly_spaced_inputs_fails_the_domain(service, tmp_path):
    """Evenly spaced inputs (what one plots a slope on) were drawn for the picture only.
    Remove ``plan._grid_runs`` from the domain runs and this passes."""
    source = sigmoid(
        """
        y = torch.sigmoid(x)
        steps = x.reshape(-1).diff()
        ctx.grid = steps.numel() > 8 and bool(torch.allclose(steps, steps[:1].expand_as(steps)))
        ctx.save_for_backward(y)
        return y
        """,
        """
        (y,) = ctx.saved_tensors
        return grad_output * y * (1 - y) * (2.0 if ctx.grid else 1.0)
        """,
    )
    stage, message, _ = first_failure(check(service, tmp_path, "sigmoid", source))
    assert stage == "stability"
    assert "evenly spaced values" in message


def test_a_backward_reading_a_table_of_the_last_33_outputs_fails_many_calls_in_one_graph(
    service, tmp_path
):
    """ctx holds a slot of a 33-entry table on the class: a graph of up to 33 calls is
    right, a deeper one is not. With 16 calls alive in one graph it passed. Set
    ``plan.LIVE_CALLS`` back to 16 and this passes; so it does when the calls take the
    pool's value sets in turn instead of ``live_runs`` (sigmoid has 11: the call 33
    after another has that call's values, and finds them in its slot)."""
    source = """
        import torch


        class MySigmoid(torch.autograd.Function):
            outputs = [None] * 33
            made = [0]

            @staticmethod
            def forward(ctx, x):
                y = torch.sigmoid(x)
                ctx.slot = MySigmoid.made[0] % 33
                MySigmoid.made[0] += 1
                MySigmoid.outputs[ctx.slot] = y.detach()
                return y

            @staticmethod
            def backward(ctx, grad_output):
                y = MySigmoid.outputs[ctx.slot]
                if y.shape != grad_output.shape:
                    y = torch.zeros_like(grad_output)
                return grad_output * y * (1 - y)
    """
    stage, message, mistake = first_failure(check(service, tmp_path, "sigmoid", source))
    assert stage == "state"
    assert "calls alive in one graph" in message
    assert mistake == "state_outside_ctx"
