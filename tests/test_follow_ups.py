"""The interviewer's follow-ups (issue 31): the spec, the measurements, the loop.

Each measurement is proven by a wrong answer that passes the base check and fails
its follow-up, and a right one that passes it."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, shared_service
from trainer.checking.report import Verdict
from trainer.checking.runner import run_check
from trainer.errors import SpecError
from trainer.spec import Exercise, exercise_from_mapping, load_exercise

SIGMOID = REPO / "exercises" / "sigmoid.yaml"
SOFTMAX = REPO / "exercises" / "softmax.yaml"


def _with_follow_ups(path: Path, follow_ups: list[dict[str, Any]]) -> Exercise:
    exercise = load_exercise(path, f"exercises/{path.name}")
    data = {k: v for k, v in exercise.data.items() if k != "follow_ups"}
    data["wrong_variants"] = [v for v in data["wrong_variants"] if "follow_up" not in v]
    return exercise_from_mapping({**data, "follow_ups": follow_ups}, f"exercises/{path.name}", path)


SAVE_LESS = {
    "id": "save_less",
    "question": "What does your backward keep? Could it keep less?",
    "hints": ["σ′ can be written with σ alone."],
    "check": "saved",
    "at_most": 1.0,
    "of": "output",
}


def test_a_follow_up_that_names_an_unknown_input_is_refused_naming_file_and_field():
    with pytest.raises(SpecError) as error:
        _with_follow_ups(SIGMOID, [{**SAVE_LESS, "of": "y"}])
    assert "exercises/sigmoid.yaml: follow_ups[0].of: 'y' is not one of" in error.value.message


def test_a_follow_up_without_its_budget_or_with_three_hints_is_refused():
    with pytest.raises(SpecError) as error:
        _with_follow_ups(SIGMOID, [{k: v for k, v in SAVE_LESS.items() if k != "at_most"}])
    assert "follow_ups[0].at_most: is required but missing" in error.value.message
    with pytest.raises(SpecError) as error:
        _with_follow_ups(SIGMOID, [{**SAVE_LESS, "hints": ["a", "b", "c"]}])
    assert "follow_ups[0].hints: give one or two hints" in error.value.message


def test_a_wrong_variant_may_name_only_a_declared_follow_up():
    exercise = load_exercise(SIGMOID, "exercises/sigmoid.yaml")
    data = {k: v for k, v in exercise.data.items() if k != "follow_ups"}
    data["wrong_variants"] = [
        {"file": "x.py", "fails_at": "backward", "why": "w", "follow_up": "nope"}
    ]
    with pytest.raises(SpecError) as error:
        exercise_from_mapping(data, "exercises/sigmoid.yaml", SIGMOID)
    assert "wrong_variants[0].follow_up: 'nope' is not one of follow_ups (none)" in (
        error.value.message
    )


def test_activating_a_double_backward_or_domain_follow_up_switches_the_stages_on():
    exercise = _with_follow_ups(
        SIGMOID,
        [
            {"id": "twice", "question": "q", "hints": ["h"], "check": "double_backward"},
            {"id": "wide", "question": "q", "hints": ["h"], "check": "domain",
             "domain": {"x": [-1.0e4, 1.0e4]}},
        ],
    )  # fmt: skip
    assert "double_backward" not in exercise.stage_weights()
    assert "double_backward" in exercise.with_follow_up("twice").stage_weights()
    assert exercise.with_follow_up("wide").parameters[0].domain == (-1.0e4, 1.0e4)  # type: ignore[union-attr]
    assert exercise.with_follow_up(None).follow_up is None


def test_no_follow_up_stage_runs_unless_a_follow_up_is_active():
    exercise = _with_follow_ups(SIGMOID, [SAVE_LESS])
    assert not [s for s in exercise.stage_weights() if s.startswith("follow_up")]


def _stages(exercise: Exercise, file: Path) -> dict[str, tuple[Verdict, str]]:
    report = run_check(exercise, file, service=shared_service(), catalogue_file=True)
    return {s.id: (s.verdict, s.message) for s in report.stages}


def _passes_the_base_check(stages: dict[str, tuple[Verdict, str]]) -> bool:
    return all(v is not Verdict.FAIL for k, (v, _) in stages.items() if not k.startswith("follow"))


SAVES_INPUT_AND_OUTPUT = """
import torch

class MySigmoid(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        out = torch.sigmoid(x)
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, grad_output):
        x, out = ctx.saved_tensors
        return grad_output * out * (1 - out)
"""


def test_saved_memory_fails_a_backward_that_keeps_input_and_output_and_passes_the_reference(
    write_file: Callable[[str, str], Path],
):
    exercise = _with_follow_ups(SIGMOID, [SAVE_LESS]).with_follow_up("save_less")
    wrong = _stages(exercise, write_file("wrong.py", SAVES_INPUT_AND_OUTPUT))
    assert all(v is not Verdict.FAIL for k, (v, _) in wrong.items() if k != "follow_up_saved"), (
        wrong
    )
    verdict, message = wrong["follow_up_saved"]
    assert verdict is Verdict.FAIL
    assert "saved 2 tensors of 200,000 elements" in message, message
    assert "budget 1 × the output = 100,000 elements" in message
    right = _stages(exercise, REPO / "solutions" / "sigmoid.py")
    assert right["follow_up_saved"][0] is Verdict.PASS, right
    assert "saved 1 tensor of 100,000 elements" in right["follow_up_saved"][1]


MAX_POOL2D = REPO / "exercises" / "max_pool2d.yaml"
WHAT_BACKWARD_NEEDS = {
    "id": "what_backward_needs",
    "question": "What does your backward keep? Does it need the values?",
    "hints": ["Which element won, per window?"],
    "check": "saved",
    "at_most": 0.8,
    "of": "x",
    "case": {"x": [8, 16, 24, 24], "kernel_size": 2, "stride": 2},
}


def test_a_saved_follow_ups_unit_is_elements_or_bytes_and_only_a_saved_one_has_one():
    with pytest.raises(SpecError) as error:
        _with_follow_ups(MAX_POOL2D, [{**WHAT_BACKWARD_NEEDS, "unit": "bits"}])
    assert "follow_ups[0].unit: 'bits' is not one of: elements, bytes" in error.value.message
    with pytest.raises(SpecError) as error:
        working = {k: v for k, v in WHAT_BACKWARD_NEEDS.items() if k != "of"}
        _with_follow_ups(MAX_POOL2D, [{**working, "check": "working_memory", "unit": "bytes"}])
    assert "follow_ups[0].unit: is not a known field" in error.value.message, error.value.message
    assert _with_follow_ups(MAX_POOL2D, [WHAT_BACKWARD_NEEDS]).follow_ups[0].unit == "elements"


def test_a_saved_budget_in_bytes_counts_what_each_tensor_weighs_a_bool_a_byte_a_float_four(
    write_file: Callable[[str, str], Path],
):
    from tests.test_follow_ups_core import MAX_POOL2D_WINNER_MASK

    # One bool per element of each 2×2 window: as many elements as x, a quarter of its bytes.
    mask = write_file("mask.py", MAX_POOL2D_WINNER_MASK)
    in_bytes = _with_follow_ups(MAX_POOL2D, [{**WHAT_BACKWARD_NEEDS, "unit": "bytes"}])
    verdict, message = _stages(in_bytes.with_follow_up("what_backward_needs"), mask)[
        "follow_up_saved"
    ]
    assert verdict is Verdict.PASS, message
    assert "(73,728 bytes); budget 0.8 × `x` = 235,929 bytes" in message, message
    # x and the output: 92,160 elements, under 235,929, but 368,640 bytes, over it.
    floats = REPO / "solutions" / "wrong" / "max_pool2d" / "saves_input_and_output.py"
    verdict, message = _stages(in_bytes.with_follow_up("what_backward_needs"), floats)[
        "follow_up_saved"
    ]
    assert verdict is Verdict.FAIL, message
    assert "(368,640 bytes); budget 0.8 × `x` = 235,929 bytes" in message, message
    in_elements = _with_follow_ups(MAX_POOL2D, [WHAT_BACKWARD_NEEDS])
    verdict, message = _stages(in_elements.with_follow_up("what_backward_needs"), mask)[
        "follow_up_saved"
    ]
    assert verdict is Verdict.FAIL, message
    assert "saved 1 tensor of 73,728 elements" in message
    assert "budget 0.8 × `x` = 58,982 elements" in message, message
    # int64 positions, one per window: 18,432 elements, under 58,982, in 147,456 bytes.
    reference = REPO / "solutions" / "max_pool2d.py"
    verdict, message = _stages(in_elements.with_follow_up("what_backward_needs"), reference)[
        "follow_up_saved"
    ]
    assert verdict is Verdict.PASS, message


NO_JACOBIAN = {
    "id": "no_jacobian",
    "question": "How much memory does your backward allocate while it runs?",
    "hints": ["Only the Jacobian's product with grad_output is needed."],
    "check": "working_memory",
    "at_most": 8.0,
    "case": {"x": [32, 256], "dim": -1},
}
WRONG_SOFTMAX = REPO / "solutions" / "wrong" / "softmax"


def test_working_memory_fails_a_softmax_backward_that_builds_the_jacobian():
    exercise = load_exercise(SOFTMAX, "exercises/softmax.yaml").with_follow_up("no_jacobian")
    wrong = _stages(exercise, WRONG_SOFTMAX / "builds_the_jacobian.py")
    assert _passes_the_base_check(wrong), wrong
    verdict, message = wrong["follow_up_memory"]
    assert verdict is Verdict.FAIL
    assert "backward's working memory is too large: backward allocates up to" in message
    assert "× the largest input or output (32.8 kB); budget 8 ×" in message
    right = _stages(exercise, REPO / "solutions" / "softmax.py")
    assert right["follow_up_memory"][0] is Verdict.PASS, right["follow_up_memory"]


def test_speed_fails_a_softmax_backward_that_loops_over_rows_in_python():
    exercise = load_exercise(SOFTMAX, "exercises/softmax.yaml").with_follow_up("fast")
    wrong = _stages(exercise, WRONG_SOFTMAX / "loops_over_rows.py")
    assert _passes_the_base_check(wrong), wrong
    verdict, message = wrong["follow_up_speed"]
    assert verdict is Verdict.FAIL
    assert "backward is slow: backward takes" in message and "budget 25 ×" in message
    right = _stages(exercise, REPO / "solutions" / "softmax.py")
    assert right["follow_up_speed"][0] is Verdict.PASS, right["follow_up_speed"]


def test_validate_holds_a_follow_up_variant_to_failing_its_follow_up_and_the_reference_to_passing(
    tmp_path: Path,
):
    import shutil

    import yaml

    from trainer.authoring import validate

    (tmp_path / "exercises").mkdir()
    (tmp_path / "solutions" / "wrong" / "softmax").mkdir(parents=True)
    data = dict(yaml.safe_load(SOFTMAX.read_text(encoding="utf-8")))
    data["follow_ups"] = [NO_JACOBIAN]
    data["wrong_variants"] = [
        # the right answer declared as the follow-up's wrong one: it must not hold
        {"file": "right.py", "fails_at": "follow_up_memory", "why": "w", "follow_up": "no_jacobian"},
        {"file": "builds_the_jacobian.py", "fails_at": "follow_up_memory", "why": "w",
         "follow_up": "no_jacobian"},
    ]  # fmt: skip
    spec = tmp_path / "exercises" / "softmax.yaml"
    spec.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    shutil.copy(REPO / "solutions" / "softmax.py", tmp_path / "solutions" / "softmax.py")
    wrong = tmp_path / "solutions" / "wrong" / "softmax"
    shutil.copy(REPO / "solutions" / "softmax.py", wrong / "right.py")
    shutil.copy(WRONG_SOFTMAX / "builds_the_jacobian.py", wrong)
    (result,) = validate([(spec, "exercises/softmax.yaml")], jobs=2, service=shared_service())
    assert not result.solution, result.solution
    assert result.problems == ["right.py: expected follow_up_memory, got passed"], result.problems


def test_validate_runs_only_the_follow_ups_stages_on_the_reference_and_still_catches_it(
    tmp_path: Path,
):
    """The reference's follow-up check runs load and the follow-up's stages only (the
    others ran in its plain check); a reference that fails only its follow-up is still
    named."""
    import shutil

    import yaml

    from trainer.authoring import validate

    data = dict(yaml.safe_load(SOFTMAX.read_text(encoding="utf-8")))
    data["follow_ups"] = [NO_JACOBIAN]
    data["wrong_variants"] = []
    (tmp_path / "exercises").mkdir()
    (tmp_path / "solutions").mkdir()
    spec = tmp_path / "exercises" / "softmax.yaml"
    spec.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    # The Jacobian-building backward is right (it passes every plain stage) and is the
    # reference here: only the follow-up fails it.
    shutil.copy(WRONG_SOFTMAX / "builds_the_jacobian.py", tmp_path / "solutions" / "softmax.py")
    active = load_exercise(spec).with_follow_up("no_jacobian")
    report = run_check(
        active,
        tmp_path / "solutions" / "softmax.py",
        service=shared_service(),
        only_stages=("follow_up_memory",),
    )
    assert [s.id for s in report.stages] == ["load", "follow_up_memory"]
    (result,) = validate([(spec, "exercises/softmax.yaml")], jobs=2, service=shared_service())
    assert result.solution.startswith(
        "the reference solution fails at follow_up_memory (follow-up no_jacobian)"
    ), result.solution


def test_after_a_pass_check_names_the_follow_up_followup_takes_it_up_until_passed_and_list_counts_it(
    isolated_workspace: Path,
):
    import shutil

    from tests.conftest import run_cli
    from trainer.state import StateStore

    assert run_cli("start", "softmax").exit_code == 0
    scratch = isolated_workspace / "softmax.py"
    shutil.copy(WRONG_SOFTMAX / "builds_the_jacobian.py", scratch)
    first = run_cli("check", "softmax")
    assert first.exit_code == 0, first.stdout
    assert "The interviewer has a follow-up question (2 left): trainer followup softmax" in (
        " ".join(first.stdout.split())
    )
    asked = run_cli("followup", "softmax")
    assert "Follow-up 1 of 2: no_jacobian" in asked.stdout
    assert "How much memory does it allocate while it runs" in " ".join(asked.stdout.split())
    assert '"Follow-up: working memory"' in " ".join(asked.stdout.split())
    failing = run_cli("check", "softmax")
    assert failing.exit_code == 1
    assert "backward's working memory is too large" in " ".join(failing.stdout.split())
    shutil.copy(REPO / "solutions" / "softmax.py", scratch)
    passing = run_cli("check", "softmax")
    assert passing.exit_code == 0
    words = " ".join(passing.stdout.split())
    assert "Follow-up no_jacobian passed." in words
    assert "(1 left): trainer followup softmax" in words
    progress = StateStore(isolated_workspace).load().progress("softmax")
    assert progress.follow_ups_passed == ["no_jacobian"]
    listed = run_cli("followup", "softmax", "--list").stdout
    assert "1. no_jacobian (passed)" in listed and "2. fast" in listed
    (row,) = [line for line in run_cli("list").stdout.splitlines() if " softmax " in line]
    assert re.search(r"softmax\s+hard\s+passed\s+.*\s1/2\s", row), row


def test_a_follow_up_shares_the_plan_of_its_exercise_unless_it_changes_the_spec():
    """Validation checks an exercise with and without each follow-up: one plan serves
    both, unless the follow-up writes into the spec what the plan reads (here: second
    derivatives)."""
    from trainer.checking.job import Job

    def key(exercise: Exercise) -> tuple[str, int]:
        return Job(exercise=dict(exercise.data), spec_path="", spec_name="", file="",
                   source="", seed=0, token="", output_mark="").plan_key  # fmt: skip

    tanh = load_exercise(REPO / "exercises" / "tanh.yaml")
    assert key(tanh.with_follow_up("save_output_only")) == key(tanh)
    assert key(tanh.with_follow_up("twice_differentiable")) != key(tanh)


def test_check_json_says_which_follow_up_it_graded_and_how_many_are_left(
    isolated_workspace: Path,
):
    """`trainer check --json` carries the follow-ups as the check() API does; an exercise
    without follow-ups has no such key."""
    import json
    import shutil

    from tests.conftest import run_cli

    assert run_cli("start", "softmax").exit_code == 0
    shutil.copy(REPO / "solutions" / "softmax.py", isolated_workspace / "softmax.py")
    first = json.loads(run_cli("check", "softmax", "--json").stdout)
    assert first["follow_up"] == {"id": None, "stages": [], "passed": False, "left": 2,
                                  "asked": None}  # fmt: skip
    assert run_cli("followup", "softmax").exit_code == 0
    graded = json.loads(run_cli("check", "softmax", "--json").stdout)
    assert graded["follow_up"]["id"] == "no_jacobian"
    assert graded["follow_up"]["stages"] == ["follow_up_memory"]
    assert graded["follow_up"]["passed"] is True and graded["follow_up"]["left"] == 1
    assert run_cli("start", "relu").exit_code == 0
    shutil.copy(REPO / "solutions" / "relu.py", isolated_workspace / "relu.py")
    assert "follow_up" not in json.loads(run_cli("check", "relu", "--json").stdout)
