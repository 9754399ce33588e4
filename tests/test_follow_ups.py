"""The interviewer's follow-ups (issue 31): the spec, the measurements, the loop.

Each measurement is proven by a wrong answer that passes the base check and fails
its follow-up, and a right one that passes it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO
from trainer.errors import SpecError
from trainer.spec import Exercise, exercise_from_mapping, load_exercise

SIGMOID = REPO / "exercises" / "sigmoid.yaml"


def _with_follow_ups(path: Path, follow_ups: list[dict[str, Any]]) -> Exercise:
    exercise = load_exercise(path, f"exercises/{path.name}")
    data = {k: v for k, v in exercise.data.items() if k != "follow_ups"}
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
    data = dict(exercise.data)
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
