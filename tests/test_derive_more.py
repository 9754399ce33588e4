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
    ("reduce_mean", "x", "where(keepdim, g / size(x, dim), unsqueeze(g / size(x, dim), dim))"),
    ("reduce_mean", "x", "where(keepdim, g, unsqueeze(g, dim)) * numel(g) / numel(x)"),
    ("dropout", "x", "where(mask, g, 0) / (1 - p)"),
    ("dropout", "x", "g * (mask > 0) / (1 - p)"),
    (
        "cross_entropy",
        "logits",
        "g * (exp(log_softmax(logits, 1)) - onehot(target, size(logits, 1))) / size(target, 0)",
    ),
    ("cross_entropy", "logits", "g*(softmax(logits,-1) - Y)/numel(target)"),
    (
        "label_smoothing_ce",
        "logits",
        "g * unsqueeze(target != ignore_index, 1) * (softmax(logits, 1) - Y"
        " + label_smoothing * (Y - 1 / size(logits, 1))) / max(sum(target != ignore_index), 1)",
    ),
    (
        "label_smoothing_ce",
        "logits",
        "where(kept, g * (softmax(logits, -1) - (1 - label_smoothing) * Y"
        " - label_smoothing / size(Y, -1)), 0) / max(sum(kept), 1)",
    ),
    ("kl_div", "input", "-g * target / size(target, 0)"),
    ("kl_div", "input", "-grad_output * target / numel(sum(input, all_but(0)))"),
    (
        "info_nce",
        "a",
        "g * (softmax(S, -1) @ b + softmax(S, 0) @ b - 2 * b) / (2 * n * temperature)",
    ),
    (
        "info_nce",
        "b",
        "g * (softmax(Sᵀ, 1) @ a + softmax(Sᵀ, 0) @ a - 2 * a) / (2 * size(b, 0) * temperature)",
    ),
    ("attention", "q", "(P * (g @ vᵀ - sum(g * y, -1))) @ k / sqrt(d)"),
    ("attention", "k", "((P * (g @ vᵀ - sum(g * y, -1)))ᵀ @ q) / sqrt(d)"),
    ("attention", "v", "(gᵀ @ P)ᵀ"),
    (
        "batch_norm",
        "x",
        "(g*w - mean(g*w, all_but(1)) - (x - mu) * rstd^2 * mean(g*w*(x - mu), all_but(1)))"
        " / sqrt(var(x, all_but(1)) + eps)",
    ),
    ("batch_norm", "weight", "reshape(sum(g * xhat, all_but(1)), weight)"),
    ("batch_norm", "bias", "sum(g, all_but(1))"),
    (
        "embedding",
        "weight",
        "sum(unsqueeze(onehot(indices, V), -1) * unsqueeze(g, -2), all_but((-2, -1)))"
        " * (1 - unsqueeze(pad, -1))",
    ),
    (
        "tied_embedding",
        "weight",
        "sum(Yᵀ @ g @ weight, all_but((-2, -1))) + sum(gᵀ @ Y @ weight, all_but((-2, -1)))",
    ),
    ("topk", "x", "sum(unsqueeze(g1, -2) * (unsqueeze(x, -1) == unsqueeze(y1, -2)), -1)"),
    ("topk", "x", "unsqueeze(g1, -2) @ onehot(y2, size(x, -1))"),
    ("mlp", "x", "(g / size(x, 0) * (softmax(z, 1) - Y) @ W2.T * (1 - tanh(a)^2)) @ W1.T"),
    ("mlp", "b1", "sum_to((g * (softmax(z, -1) - Y) / size(x, 0)) @ W2ᵀ * (1 - h^2), b1)"),
    ("mlp", "b2", "sum(g * (softmax(z, -1) - onehot(target, size(b2, 0))), 0) / size(target, 0)"),
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
    ("reduce_mean", "x", "g / size(x, dim)", "transposed"),
    ("reduce_mean", "x", "where(keepdim, g, unsqueeze(g, dim)) / numel(x)", "constant_factor"),
    ("dropout", "x", "g * (1 - mask) / (1 - p)", "kept_and_dropped_swapped"),
    ("dropout", "x", "mask / (1 - p)", "no_grad_output"),
    ("cross_entropy", "logits", "g * softmax(logits, 1) / size(logits, 0)", "one_hot_missing"),
    ("cross_entropy", "logits", "-g * Y / size(logits, 0)", "softmax_missing"),
    (
        "label_smoothing_ce",
        "logits",
        "g * kept * (softmax(logits, -1) - Y) / max(sum(kept), 1)",
        "smoothing_ignored",
    ),
    (
        "label_smoothing_ce",
        "logits",
        "g * kept * (softmax(logits, -1) - (1 - label_smoothing) * Y"
        " - label_smoothing / size(logits, -1)) / size(logits, 0)",
        "mean_over_all_rows",
    ),
    ("kl_div", "input", "-g * target / numel(target)", "mean_over_elements"),
    ("kl_div", "input", "g * (exp(input) - target) / size(input, 0)", "gradient_for_logits"),
    (
        "info_nce",
        "a",
        "g * (softmax(S, 1) + softmax(S, 0)) @ b / (2 * n * temperature)",
        "positive_not_subtracted",
    ),
    ("info_nce", "a", "g * (softmax(S, 1) @ b - b) / (2 * n * temperature)", "one_direction_only"),
    ("attention", "q", "(P * (g @ vᵀ)) @ k / sqrt(d)", "softmax_correction_missing"),
    (
        "attention",
        "q",
        "(P * (1 - P) * (g @ vᵀ)) @ k / sqrt(size(q, -1))",
        "softmax_jacobian_diagonal_only",
    ),
    ("batch_norm", "x", "g * w / sqrt(var(x, all_but(1)) + eps)", "statistics_treated_as_constant"),
    ("batch_norm", "x", "rstd * (g * w - mean(g * w, all_but(1)))", "variance_path_missing"),
    ("batch_norm", "bias", "g", "not_summed_over_batch"),
    ("embedding", "weight", "sum(onehot(indices, V)ᵀ @ g, all_but((-2, -1)))", "missing_mask"),
    (
        "tied_embedding",
        "weight",
        "sum(gᵀ @ (onehot(indices, size(weight, 0)) @ weight), all_but((-2, -1)))",
        "lookup_use_dropped",
    ),
    (
        "tied_embedding",
        "weight",
        "sum(Yᵀ @ (g @ weight), all_but((-2, -1)))",
        "projection_use_dropped",
    ),
    ("topk", "x", "sum(onehot(y2, size(x, -1)), -2)", "no_grad_output"),
    ("topk", "x", "sum(Y * unsqueeze(y1, -1), -2)", "no_grad_output"),
    (
        "mlp",
        "x",
        "((g * (softmax(z, -1) - Y) / size(x, 0)) @ W2ᵀ * (1 - a^2)) @ W1ᵀ",
        "tanh_slope_from_preactivation",
    ),
    ("mlp", "x", "(g * (softmax(z, -1) - Y) / size(x, 0)) @ W2ᵀ @ W1ᵀ", "tanh_slope_forgotten"),
    ("mlp", "W2", "aᵀ @ (g * (softmax(z, -1) - Y) / size(x, 0))", "w2_grad_from_preactivation"),
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


def test_batch_norm_statistics_over_a_fixed_list_of_dimensions_fail_on_the_other_rank():
    """all_but(1) is what makes one formula hold for (N, C) and (N, C, H, W) alike."""
    verdict = board("batch_norm").judge("bias", "sum(g, (0, 2, 3))")
    assert isinstance(verdict, Wrong) and verdict.mistake == "cannot_compute"
    assert verdict.wrong_runs < verdict.runs and "dimension 2 does not exist" in verdict.words


def test_class_indices_and_a_mask_are_names_of_whole_numbers():
    shown = dict(names(CATALOG.get("cross_entropy")))
    assert shown["target"].startswith("whole numbers (no gradient)")
    assert shown["Y"] == "= onehot(target, size(logits, -1))"
    assert dict(names(CATALOG.get("dropout")))["mask"].startswith("whole numbers")


def test_the_readme_counts_the_exercises_with_a_formula_and_names_those_without():
    import re

    from tests.conftest import REPO

    readme = (REPO / "README.md").read_text()
    start = readme.index("`trainer derive --list` shows which exercises have a formula")
    said = " ".join(readme[start : readme.index("###", start)].split())
    count = re.search(r"have a formula, (\d+) of the (\d+)", said)
    assert count is not None
    without = sorted(e.id for e in CATALOG.all if e.derive is None)
    assert (int(count.group(1)), int(count.group(2))) == (
        len(CATALOG.all) - len(without),
        len(CATALOG.all),
    )
    assert f"The {len(without)} without one" in said
    named = re.findall(r"`([a-z0-9_]+)`", said[said.index("without one") :])
    assert sorted(named) == without


def test_an_index_output_is_a_name_of_numbers_that_any_formula_can_use():
    """top-k's indices (y2) are an integer output: a formula of them alone still gets a
    verdict, never a type error."""
    verdict = board("topk").judge("x", "y2 + g2")
    assert isinstance(verdict, Wrong), verdict


GIVEN_A_FORMULA = {
    "custom_op",
    "exp_inplace",
    "autocast_logsumexp",
    "normalize_vmap",
    "two_output",
    "dot_jvp",
    "reduce_mean",
    "dropout",
    "cross_entropy",
    "label_smoothing_ce",
    "kl_div",
    "info_nce",
    "attention",
    "batch_norm",
    "embedding",
    "tied_embedding",
    "topk",
    "mlp",
}


def test_each_exercise_given_a_formula_here_keeps_it_with_its_mistakes():
    for exercise_id in sorted(GIVEN_A_FORMULA):
        derivation = CATALOG.get(exercise_id).derive
        assert derivation is not None and derivation.mistakes, exercise_id
