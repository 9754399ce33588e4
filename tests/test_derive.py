"""`trainer derive`: the gradient as a formula, judged on the checker's random inputs —
right in every form, wrong with its classic mistake named, and kept in progress."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import CATALOG, REPO, run_cli
from trainer.errors import SpecError
from trainer.formula import FUNCTIONS
from trainer.spec import load_exercise
from trainer.state import StateStore
from trainer.whiteboard import NotUnderstood, Right, Whiteboard, Wrong, self_check

BOARDS: dict[str, Whiteboard] = {}


def board(exercise_id: str) -> Whiteboard:
    if exercise_id not in BOARDS:
        BOARDS[exercise_id] = Whiteboard(CATALOG.get(exercise_id))
    return BOARDS[exercise_id]


@pytest.mark.parametrize(
    ("exercise_id", "name", "formula"),
    [
        ("sigmoid", "x", "g * y * (1 - y)"),
        ("sigmoid", "x", "g*sigmoid(x)*(1-sigmoid(x))"),
        ("sigmoid", "x", "g*exp(-x)/(1+exp(-x))^2"),
        ("sigmoid", "x", "g*exp(-x)/(1+exp(-x))**2"),
        ("sigmoid", "x", "g · σ(x) · σ(-x)"),
        ("sigmoid", "x", "dL/dx = grad_output * y - grad_output * y²"),
        ("tanh", "x", "g * (1 - tanh(x)^2)"),
        ("tanh", "x", "g * 4 / (exp(x) + exp(-x))^2"),
        ("relu", "input", "where(input > 0, g, 0)"),
        ("relu", "input", "g * (sign(input) + 1) / 2"),
        ("exp", "input", "g * exp(input)"),
        ("softplus", "x", "g * (1 - exp(-y))"),
        ("log_sigmoid", "x", "g * (1 - exp(y))"),
        ("leaky_relu", "x", "g * ((x > 0) + negative_slope * (x <= 0))"),
        (
            "gelu",
            "x",
            "g * (0.5 * (1 + t) + 0.5 * x * (1 - t²) * sqrt(2/pi) * (1 + 0.134145 * x²))",
        ),
        ("linear", "x", "g @ weight"),
        ("linear", "x", "(weightᵀ @ gᵀ)ᵀ"),
        ("linear", "weight", "g.T @ x"),
        ("linear", "bias", "sum(g, 0)"),
        ("linear", "bias", "sum_to(g, bias)"),
        ("softmax", "x", "y * (g - sum(g * y, dim))"),
        ("softmax", "x", "y*g - y*sum(y*g, dim)"),
        ("softmax", "x", "softmax(x, dim) * (g - sum(g * softmax(x, dim), dim))"),
        ("log_softmax", "x", "g - softmax(x, dim) * sum(g, dim)"),
        (
            "layer_norm",
            "x",
            "(g*weight - mean(g*weight, -1) - xhat*mean(g*weight*xhat, -1)) / sqrt(var(x, -1) + eps)",
        ),
        (
            "layer_norm",
            "x",
            "rstd * (g*weight - mean(g*weight, -1)"
            " - (x - mean(x, -1)) * rstd^2 * mean(g*weight*(x - mean(x, -1)), -1))",
        ),
        ("layer_norm", "weight", "sum_to(g * (x - mean(x, -1)) * rstd, weight)"),
        ("layer_norm", "bias", "sum_to(g, bias)"),
        ("logsumexp", "x", "unsqueeze(g, -1) * exp(x - unsqueeze(y, -1))"),
        ("mse_loss", "prediction", "2 * g * (prediction - target) / numel(prediction)"),
        ("mse_loss", "target", "2 * g * (target - prediction) / numel(target)"),
        ("broadcast_matmul", "b", "sum_to(aᵀ @ g, b)"),
    ],
)
def test_every_form_of_the_right_gradient_is_accepted(exercise_id, name, formula):
    verdict = board(exercise_id).judge(name, formula)
    assert isinstance(verdict, Right), verdict
    assert verdict.runs == len(board(exercise_id).runs) >= 4


@pytest.mark.parametrize(
    ("exercise_id", "name", "formula", "mistake", "words"),
    [
        ("sigmoid", "x", "y * (1 - y)", "no_grad_output", "your formula forgets g"),
        ("sigmoid", "x", "-g * y * (1 - y)", "sign_flipped", "the sign flipped"),
        ("sigmoid", "x", "g * y * (1 - y) / 2", "constant_factor", "0.5 times the gradient"),
        ("sigmoid", "x", "g * x * (1 - x)", "slope_from_input", "the saved input x is used"),
        ("tanh", "x", "g * y * (1 - y)", "sigmoid_slope_formula", ""),
        ("relu", "input", "g", "missing_mask", "a factor such as (x > 0) is missing"),
        ("relu", "input", "g * (input < 0)", "inverted_mask", "mask is inverted"),
        ("linear", "weight", "xᵀ @ g", "transposed", "the transpose of the gradient"),
        ("linear", "bias", "g", "not_summed_over_batch", "not summed over the dimensions bias"),
        ("linear", "bias", "sum(g, -1)", "bias_summed_over_features", ""),
        ("softmax", "x", "g * y * (1 - y)", "jacobian_diagonal_only", ""),
        ("log_softmax", "x", "g - exp(y)", "upstream_assumed_to_sum_to_one", ""),
        ("layer_norm", "x", "g * weight * rstd", "normalisation_treated_as_constant", ""),
        ("layer_norm", "weight", "sum(g * xhat, 0)", "not_summed_over_batch", ""),
        ("gelu", "x", "g * (Phi(x) + x * phi(x))", "exact_gelu_slope", ""),
        (
            "mse_loss",
            "prediction",
            "2 * g * mean(prediction - target)",
            "mean_before_differentiating",
            "",
        ),
        ("mse_loss", "prediction", "2 * g * (prediction - target)", "constant_factor", "times the"),
        ("batched_matmul", "b", "gᵀ @ a", "transposed", ""),
        ("logsumexp", "x", "g * softmax(x, -1)", "cannot_compute", "do not broadcast"),
    ],
)
def test_a_classic_mistake_is_rejected_and_named(exercise_id, name, formula, mistake, words):
    verdict = board(exercise_id).judge(name, formula)
    assert isinstance(verdict, Wrong), verdict
    assert verdict.mistake == mistake
    assert words in verdict.words


def test_a_wrong_formula_shows_where_it_is_wrong_with_the_input_there():
    verdict = board("sigmoid").judge("x", "y * (1 - y)")
    assert isinstance(verdict, Wrong)
    assert verdict.wrong_runs == verdict.runs
    assert verdict.case == "x: (7,)"
    assert verdict.view and "expected" in verdict.view[0] and "(at x = " in verdict.view[0]


def test_a_formula_right_for_one_dimension_only_is_wrong_on_the_cases_of_another():
    verdict = board("softmax").judge("x", "y * (g - sum(g * y, -1))")
    assert isinstance(verdict, Wrong)
    assert 0 < verdict.wrong_runs < verdict.runs
    assert "dim=-2" in verdict.case or "dim=0" in verdict.case or "dim=1" in verdict.case


def test_shapes_that_do_not_fit_are_wrong_with_the_part_of_the_formula_that_failed():
    text = "g @ weight.T"
    verdict = board("linear").judge("x", text)
    assert isinstance(verdict, Wrong) and verdict.mistake == "cannot_compute"
    assert verdict.error is not None
    assert text[verdict.error.start : verdict.error.end] == "g @ weight.T"
    assert "@ cannot multiply shapes" in verdict.words


def test_a_dimension_that_does_not_exist_is_named():
    verdict = board("sigmoid").judge("x", "g * y * (1 - sum(y, 3))")
    assert isinstance(verdict, Wrong) and verdict.error is not None
    assert "dimension 3 does not exist" in verdict.words


def test_a_float_used_as_a_dimension_is_refused_when_evaluated():
    verdict = board("layer_norm").judge("bias", "sum(g, eps)")
    assert isinstance(verdict, Wrong)
    assert "`eps` is not a whole number" in verdict.words


def test_a_formula_that_divides_by_zero_is_wrong_for_being_not_finite():
    verdict = board("sigmoid").judge("x", "g * y * (1 - y) / (x - x)")
    assert isinstance(verdict, Wrong) and verdict.mistake == "non_finite"


def test_garbage_is_not_understood_with_its_position():
    verdict = board("sigmoid").judge("x", "g * y * (1 - y]")
    assert isinstance(verdict, NotUnderstood)
    assert verdict.error.start == 14 and "indexing" in verdict.error.message


def test_every_derive_section_of_the_catalogue_holds():
    derived = [e for e in CATALOG.all if e.derive is not None]
    required = {"sigmoid", "tanh", "relu", "exp", "softplus", "silu", "gelu", "leaky_relu"}
    required |= {"log_sigmoid", "linear", "softmax", "layer_norm"}
    assert required <= {e.id for e in derived}
    for exercise in derived:
        assert self_check(exercise) == [], exercise.id
        assert exercise.derive is not None and exercise.derive.mistakes, exercise.id


# The spec's derive section.


def _with_derive(tmp_path: Path, derive: Any) -> Path:
    data = yaml.safe_load((REPO / "exercises" / "sigmoid.yaml").read_text())
    data["derive"] = derive
    folder = tmp_path / "mine" / "exercises"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "sigmoid.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True))
    return path


@pytest.mark.parametrize(
    ("derive", "words"),
    [
        ({"answers": {"x": "g * y * (1 - y"}}, "derive.answers.x: not understood at character 15"),
        ({"answers": {"z": "g"}}, "derive.answers.z: is not a known field"),
        ({"answers": {}}, "derive.answers: needs the gradient of at least one of: x"),
        ({"answers": {"x": "g * s"}, "names": {"y": "x"}}, "derive.names.y: 'y' is already a name"),
        ({"answers": {"x": "g"}, "mistakes": {"made_up": {"x": "g"}}}, "'made_up' is neither"),
        ({"answers": {"x": "g"}, "names": {"__class__": "x"}}, "no double underscore"),
    ],
)
def test_a_broken_derive_section_is_a_spec_error_naming_its_field(tmp_path, derive, words):
    with pytest.raises(SpecError) as caught:
        load_exercise(_with_derive(tmp_path, derive))
    assert words in caught.value.message


def test_a_name_the_spec_defines_may_be_used_by_the_names_after_it_and_by_answers(tmp_path):
    derive = {"names": {"s": "sigmoid(x)", "slope": "s * (1 - s)"}, "answers": {"x": "g * slope"}}
    exercise = load_exercise(_with_derive(tmp_path, derive))
    assert exercise.derive is not None and exercise.derive.scope[-2:] == ("s", "slope")
    assert self_check(exercise) == []


def test_validate_fails_a_wrong_answer_and_a_mistake_the_evaluator_accepts(tmp_path, warm_commands):
    derive = {
        "answers": {"x": "g * y"},
        "mistakes": {"constant_factor": {"x": "g * y * (1 - y)"}},
    }
    spec = _with_derive(tmp_path, derive)
    (tmp_path / "mine" / "solutions").mkdir()
    (tmp_path / "mine" / "solutions" / "sigmoid.py").write_text(
        (REPO / "solutions" / "sigmoid.py").read_text()
    )
    result = run_cli("--exercises-dir", str(tmp_path / "mine"), "validate", str(spec), "--json")
    assert result.exit_code == 1
    (entry,) = result.json()["specs"]
    problems = "\n".join(entry["problems"])
    assert "derive.answers.x: the evaluator rejects it" in problems
    assert "derive.mistakes.constant_factor.x: the evaluator accepts it as right" in problems


# The command.


def test_derive_reads_formulas_from_stdin_and_says_not_understood_wrong_and_right(
    isolated_workspace: Path,
):
    typed = "g*y(1-y)\ny * (1 - y)\ng * exp(-x) / (1 + exp(-x))^2\n"
    result = run_cli("derive", "sigmoid", input=typed)
    assert result.exit_code == 0, result.stdout
    out = result.stdout
    assert "y = torch.sigmoid(x)" in out
    assert "✘ Not understood at character 3: `y` is not a function: write y * (…)" in out
    assert "\n    ^\n" in out  # the caret under the y, below the formula shown again
    assert "✘ Wrong on every case: your formula forgets g" in out
    assert "Try again (2 tries left), or press Enter for the answer." in out
    assert "✔ Right. It equals dL/dx on all 5 cases" in out
    assert "1 of 1 right." in out
    state = json.loads((isolated_workspace / ".trainer-state.json").read_text())
    assert state["exercises"]["sigmoid"]["derive_attempts"] == 1
    assert state["exercises"]["sigmoid"]["derive_passed"] is True


def test_derive_asks_each_input_and_shows_the_answer_after_the_tries_or_on_enter(
    isolated_workspace: Path,
):
    typed = "g @ weight\nxᵀ @ g\n\ng\ng\n"
    result = run_cli("derive", "linear", "--tries", "2", input=typed)
    assert result.exit_code == 1
    out = result.stdout
    assert "dL/dx = g @ weight\n✔ Right." in out
    assert "your formula gives the transpose of the gradient" in out
    assert "The answer: dL/dweight = gᵀ @ x" in out
    assert "The answer: dL/dbias = sum(g, 0)" in out
    assert "1 of 3 right." in out and "linear: not derived yet (1 attempt" in out
    record = StateStore(isolated_workspace).load().exercises["linear"]
    assert (record.derive_attempts, record.derive_passed) == (1, False)


def test_derive_stopped_by_the_end_of_input_saves_nothing(isolated_workspace: Path):
    result = run_cli("derive", "linear", input="g @ weight\n")
    assert result.exit_code == 2
    assert "the derivation stopped: no more input. Nothing was saved" in result.stderr
    assert not (isolated_workspace / ".trainer-state.json").exists()


def test_derive_on_an_exercise_without_a_formula_says_where_to_find_one():
    result = run_cli("derive", "conv2d")
    assert result.exit_code == 2
    assert "conv2d has no formula to derive" in result.stderr
    assert "trainer derive --list" in result.stderr


def test_derive_list_shows_each_exercise_with_a_formula_and_the_record(isolated_workspace: Path):
    run_cli("derive", "sigmoid", input="g * y * (1 - y)\n")
    result = run_cli("derive", "--list")
    assert result.exit_code == 0
    lines = {line.split()[0]: line for line in result.stdout.splitlines() if line.strip()}
    assert "derived" in lines["sigmoid"] and "–" in lines["linear"]
    derivable = sum(e.derive is not None for e in CATALOG.all)
    assert f"1 of {derivable} derived." in result.stdout


def test_a_progress_file_with_a_derive_record_of_the_wrong_type_keeps_the_rest(
    isolated_workspace: Path,
):
    isolated_workspace.mkdir()
    record = {"passed": True, "derive_attempts": "many", "derive_passed": 1}
    state = {"version": 1, "current": "sigmoid", "exercises": {"sigmoid": record}}
    (isolated_workspace / ".trainer-state.json").write_text(json.dumps(state))
    store = StateStore(isolated_workspace)
    progress = store.load().exercises["sigmoid"]
    assert progress.passed and progress.derive_attempts == 0 and not progress.derive_passed
    assert store.notices == []


def test_stats_counts_the_exercises_derived_of_those_tried(isolated_workspace: Path):
    from trainer.interview import record_check

    run_cli("derive", "sigmoid", input="g * y * (1 - y)\n")
    run_cli("derive", "tanh", input="\n")
    record_check(StateStore(isolated_workspace), "sigmoid", True, None)
    result = run_cli("stats")
    assert "Derived on the whiteboard: 1 of the 2 tried (trainer derive --list)." in result.stdout


def _random_formula(rng: random.Random, names: list[str], depth: int = 0) -> str:
    """A formula the grammar can build: any operator, any function, any dimension."""
    roll = rng.random()
    if depth > 4 or roll < 0.3:
        return rng.choice([*names, "1", "0", "-1", "2.5", "pi"])
    if roll < 0.6:
        operator = rng.choice(["+", "-", "*", "/", "@", "^", "<", ">=", "=="])
        left, right = (_random_formula(rng, names, depth + 1) for _ in range(2))
        return f"({left} {operator} {right})"
    if roll < 0.7:
        inner = _random_formula(rng, names, depth + 1)
        return f"-{inner}" if rng.random() < 0.5 else f"{inner}ᵀ"
    function = rng.choice(list(FUNCTIONS))
    args = []
    for kind in FUNCTIONS[function].arguments:
        if kind == "value":
            args.append(_random_formula(rng, names, depth + 1))
        elif kind == "dims":
            dims = ["0", "1", "-1", "2", "-3", "(0, 1)", "(1, 1)", "all_but(1)", *names[:2]]
            args.append(rng.choice(dims))
        else:
            args.append(rng.choice(names))
    return f"{function}({', '.join(args)})"


@pytest.mark.parametrize(
    "exercise_id", ["layer_norm", "softmax", "linear", "logsumexp", "cross_entropy", "batch_norm"]
)
def test_any_formula_the_grammar_builds_gets_a_verdict_never_an_exception(exercise_id):
    rng = random.Random(exercise_id)
    derivation = CATALOG.get(exercise_id).derive
    assert derivation is not None
    names = list(derivation.scope)
    verdicts = set()
    for _ in range(60):
        verdict = board(exercise_id).judge(
            rng.choice(list(derivation.answers)), _random_formula(rng, names)
        )
        verdicts.add(type(verdict).__name__)
    assert "Wrong" in verdicts
