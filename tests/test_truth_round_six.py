"""Verdict truth, round six: inputs the spec allows that the draws never made. Each
file is one a learner writes (a slip, or a probe of what the checker draws), in our
own words; each test names the guard it proves."""

from __future__ import annotations

import pytest
import torch

from tests.conftest import CATALOG
from tests.test_truth import check, first_failure, passes, service, sigmoid

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


@pytest.mark.parametrize(
    ("state", "count"),
    [
        pytest.param("_seen = {'backward': 0}", "_seen['backward'] += 1", id="a dict's entry"),
        pytest.param("", "MySigmoid.steps = getattr(MySigmoid, 'steps', 0) + 1", id="on the class"),
        pytest.param(
            "class _Run:\n    step = 0",
            "_Run.step += 1",
            id="on a class of the file's own",
        ),
    ],
)
def test_a_backward_that_goes_wrong_after_many_calls_fails_whatever_the_count(
    service, tmp_path, state, count
):
    """Wrong after a million calls: no number of calls the checker makes reaches it, but
    the counter, moved a billion calls ahead, does. Remove ``_far_ahead`` from the
    scenarios and this passes."""
    reads = count.split(" ")[0].replace("getattr(MySigmoid, 'steps', 0)", "MySigmoid.steps")
    source = f"""
import torch

{state}


class MySigmoid(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.sigmoid(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad_output):
        {count}
        (y,) = ctx.saved_tensors
        late = {reads} > 1_000_000
        return grad_output * y * (1 - y) * (0.5 if late else 1.0)
"""
    stage, message, mistake = first_failure(check(service, tmp_path, "sigmoid", source))
    assert stage == "state"
    assert "moved a billion calls ahead" in message and mistake == "state_outside_ctx"


def test_a_backward_that_counts_its_calls_or_keeps_a_ring_of_them_passes(service, tmp_path):
    """Counters that do not change the gradient: a call count for a log, and the index
    of a ring of the last eight inputs, which raises when moved out of the ring (no
    training run puts it there: nothing is compared then)."""
    source = """
        import torch

        calls = [0]
        ring = [None] * 8
        at = {"next": 0}


        class MySigmoid(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                y = torch.sigmoid(x)
                ring[at["next"]] = x.detach()
                at["next"] = (at["next"] + 1) % len(ring)
                ctx.save_for_backward(y)
                return y

            @staticmethod
            def backward(ctx, grad_output):
                calls[0] += 1
                (y,) = ctx.saved_tensors
                return grad_output * y * (1 - y)
    """
    passes(check(service, tmp_path, "sigmoid", source))
