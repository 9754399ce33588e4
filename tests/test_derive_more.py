"""The whiteboard beyond the activations: the Function API's exercises, the losses over
class indices, the normalisations and attention each take their gradient as a formula,
right in forms other than the spec's and wrong with their classic mistake named."""

from __future__ import annotations

import pytest

from tests.conftest import CATALOG
from trainer.derive import names
from trainer.whiteboard import Right, Whiteboard, Wrong

BOARDS: dict[str, Whiteboard] = {}


def board(exercise_id: str) -> Whiteboard:
    if exercise_id not in BOARDS:
        BOARDS[exercise_id] = Whiteboard(CATALOG.get(exercise_id))
    return BOARDS[exercise_id]


# Forms the spec does not write, each equal to its answer.
RIGHT = [
    ("custom_op", "x", "g * (1 - exp(-beta * y))"),
    ("custom_op", "x", "g / (1 + exp(-beta * x))"),
    ("exp_inplace", "x", "g * exp(x)"),
    ("autocast_logsumexp", "x", "(unsqueeze(g, -1) * exp(s - unsqueeze(y, -1))) @ w.T"),
    ("autocast_logsumexp", "w", "xᵀ @ (unsqueeze(g, -1) * exp(x @ w - unsqueeze(y, -1)))"),
    ("normalize_vmap", "x", "g / n - y * sum(g * y, -1) / n"),
    ("normalize_vmap", "x", "(g - x * sum(x * g, -1) / n^2) / sqrt(sum(x * x, -1))"),
    ("two_output", "x", "2*g1*x + g2*y"),
    ("two_output", "y", "g1 * 2 * y + x * g2"),
    ("dot_jvp", "x", "unsqueeze(g * scale, -1) * y"),
    ("dot_jvp", "y", "scale * unsqueeze(grad_output, -1) * x"),
]


@pytest.mark.parametrize(("exercise_id", "name", "formula"), RIGHT)
def test_a_right_gradient_in_another_form_is_accepted(exercise_id, name, formula):
    verdict = board(exercise_id).judge(name, formula)
    assert isinstance(verdict, Right), verdict
    assert verdict.runs == len(board(exercise_id).runs) >= 3


# A classic mistake as a learner would type it, and the mistake it is named.
MISTAKES = [
    ("custom_op", "x", "g * sigmoid(x)", "beta_dropped"),
    ("custom_op", "x", "beta * g * sigmoid(beta * x)", "beta_factor_kept"),
    ("exp_inplace", "x", "g * exp(y)", "exp_of_output"),
    ("autocast_logsumexp", "x", "(unsqueeze(g, -1) * exp(x @ w)) @ w.T", "forgets_normaliser"),
    ("autocast_logsumexp", "w", "(unsqueeze(g, -1) * softmax(s, -1))ᵀ @ x", "transposed"),
    ("normalize_vmap", "x", "g / sqrt(sum(x^2, -1))", "no_projection"),
    ("two_output", "x", "x * g1 + y * g2", "square_slope_without_two"),
    ("two_output", "y", "2 * x * g1 + y * g2", "gradients_swapped"),
    ("two_output", "x", "2 * x * g1", "ignores_an_upstream"),
    ("dot_jvp", "x", "scale * unsqueeze(g, -1) * x", "factors_crossed"),
    ("dot_jvp", "y", "scale * unsqueeze(g, -1) * y", "y_grad_copied_from_x"),
]


@pytest.mark.parametrize(("exercise_id", "name", "formula", "mistake"), MISTAKES)
def test_a_classic_mistake_of_the_exercise_is_named(exercise_id, name, formula, mistake):
    verdict = board(exercise_id).judge(name, formula)
    assert isinstance(verdict, Wrong), verdict
    assert verdict.mistake == mistake, verdict


def test_a_formula_that_leaves_out_an_upstream_gradient_is_told_so_in_formula_words():
    verdict = board("two_output").judge("x", "2 * x * g1")
    assert isinstance(verdict, Wrong)
    assert verdict.words.startswith("your formula leaves out an upstream gradient")


def test_an_input_called_y_keeps_its_name_and_the_output_is_called_out():
    shown = dict(names(CATALOG.get("dot_jvp")))
    assert shown["y"].startswith("an input") and shown["out"] == "the output"
    assert "dL/dout" in shown["g"]
    # y is the input: a formula built on the output would not be right.
    assert isinstance(board("dot_jvp").judge("x", "scale * unsqueeze(g, -1) * y"), Right)
    verdict = board("dot_jvp").judge("y", "scale * unsqueeze(g * out, -1) * x")
    assert isinstance(verdict, Wrong)
