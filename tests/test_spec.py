"""Loading exercise specs: every problem is one line naming the file and the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import CATALOG, REPO, run_cli
from trainer.errors import SpecError
from trainer.spec import FORMAT_VERSION, TensorParam, load_exercise


def _sigmoid_data() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((REPO / "exercises" / "sigmoid.yaml").read_text())
    return data


def _load_broken(tmp_path: Path, data: object, name: str = "sigmoid.yaml") -> str:
    folder = tmp_path / "exercises"
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(yaml.safe_dump(data) if not isinstance(data, str) else data)
    with pytest.raises(SpecError) as caught:
        load_exercise(path, f"exercises/{name}")
    return caught.value.message


def test_every_bundled_spec_loads_into_typed_objects():
    exercises = CATALOG.all
    assert {"sigmoid"} <= {e.id for e in exercises}
    for exercise in exercises:
        assert len(exercise.hints) >= 3
        assert len(exercise.quiz) >= 3
        assert any(isinstance(p, TensorParam) and p.requires_grad for p in exercise.parameters)
        assert exercise.cases and exercise.stub and exercise.reference


def test_a_missing_field_names_the_file_and_the_field(tmp_path):
    data = _sigmoid_data()
    del data["class_name"]
    assert (
        _load_broken(tmp_path, data)
        == "exercises/sigmoid.yaml: class_name: is required but missing"
    )


def test_a_quiz_answer_out_of_range_names_the_question(tmp_path):
    data = _sigmoid_data()
    count = len(data["quiz"][1]["choices"])
    data["quiz"][1]["answer"] = count + 1
    message = _load_broken(tmp_path, data)
    assert message.startswith(
        f"exercises/sigmoid.yaml: quiz[1].answer: {count + 1} is out of range ({count} choices"
    )


def test_a_field_of_the_wrong_type_says_what_was_expected(tmp_path):
    data = _sigmoid_data()
    data["hints"] = "just one hint"
    assert _load_broken(tmp_path, data) == (
        "exercises/sigmoid.yaml: hints: expected a list, got str 'just one hint'"
    )


def test_too_few_hints_are_refused(tmp_path):
    data = _sigmoid_data()
    data["hints"] = data["hints"][:2]
    assert "hints: needs at least 3 entries, has 2" in _load_broken(tmp_path, data)


def test_a_case_shape_must_be_whole_numbers(tmp_path):
    data = _sigmoid_data()
    data["cases"][2]["x"] = [2, "three"]
    assert _load_broken(tmp_path, data) == (
        "exercises/sigmoid.yaml: cases[2].x[1]: expected a whole number, got str 'three'"
    )


def test_an_unknown_field_is_refused_with_the_known_ones(tmp_path):
    data = _sigmoid_data()
    data["hint"] = ["typo"]
    message = _load_broken(tmp_path, data)
    assert message.startswith("exercises/sigmoid.yaml: hint: is not a known field (known: ")


def test_a_reference_that_is_not_python_is_refused(tmp_path):
    data = _sigmoid_data()
    data["reference"] = "torch.sigmoid(x"
    assert "reference: is not a valid Python expression" in _load_broken(tmp_path, data)


def test_a_stub_with_a_syntax_error_is_refused_with_its_line(tmp_path):
    data = _sigmoid_data()
    data["stub"] = "import torch\n\ndef broken(:\n    pass\n"
    assert _load_broken(tmp_path, data).startswith("exercises/sigmoid.yaml: stub: line 3: ")


def test_invalid_yaml_gives_the_line_and_column(tmp_path):
    message = _load_broken(tmp_path, "id: sigmoid\ntitle: [unclosed\n")
    assert message.startswith("exercises/sigmoid.yaml: invalid YAML: line ")


def test_yaml_tags_that_build_python_objects_are_refused(tmp_path):
    message = _load_broken(tmp_path, "id: !!python/object/apply:os.system ['true']\n")
    assert message.startswith("exercises/sigmoid.yaml: invalid YAML")


def test_a_newer_format_version_is_refused_with_advice(tmp_path):
    data = _sigmoid_data()
    data["format_version"] = FORMAT_VERSION + 1
    assert _load_broken(tmp_path, data) == (
        f"exercises/sigmoid.yaml: format_version: {FORMAT_VERSION + 1} is newer than this "
        f"trainer understands ({FORMAT_VERSION}); upgrade the trainer to use this exercise"
    )


def test_the_id_must_match_the_file_name(tmp_path):
    data = _sigmoid_data()
    assert _load_broken(tmp_path, data, name="other.yaml") == (
        "exercises/other.yaml: id: 'sigmoid' must match the file name ('other')"
    )


def test_an_empty_spec_file_is_refused(tmp_path):
    assert _load_broken(tmp_path, "") == "exercises/sigmoid.yaml: is empty"


def test_a_spec_that_is_not_utf8_is_refused(tmp_path):
    folder = tmp_path / "exercises"
    folder.mkdir()
    path = folder / "sigmoid.yaml"
    path.write_bytes(b"id: \xff\xfe\n")
    with pytest.raises(SpecError, match=r"is not UTF-8 text"):
        load_exercise(path, "exercises/sigmoid.yaml")


def test_the_cli_prints_a_broken_spec_as_one_line_without_a_traceback(tmp_path, monkeypatch):
    data = _sigmoid_data()
    data["quiz"][0]["answer"] = 9
    choices = len(data["quiz"][0]["choices"])
    (tmp_path / "exercises").mkdir()
    (tmp_path / "exercises" / "sigmoid.yaml").write_text(yaml.safe_dump(data))
    monkeypatch.setattr("trainer.catalog.catalog_root", lambda: tmp_path)
    result = run_cli("hint", "sigmoid")
    assert result.exit_code == 2
    assert "Traceback" not in result.stderr + result.stdout
    assert result.stderr.strip() == (
        f"error: exercises/sigmoid.yaml: quiz[0].answer: 9 is out of range ({choices} choices; "
        "answers count from 1). Fix that field of the spec; docs/spec-format.md describes every "
        "field."
    )
