"""Authoring: validate, new, extra exercise folders."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import REPO, run_cli


def test_validate_passes_over_the_whole_catalogue():
    result = run_cli("validate", "--json")
    document = result.json()
    failing = {s["spec"]: s["problems"] for s in document["specs"] if not s["ok"]}
    assert result.exit_code == 0, failing
    assert document["ok"] is True
    assert len(document["specs"]) >= 3


@pytest.fixture
def scaffold(tmp_path: Path) -> Path:
    root = tmp_path / "mine"
    result = run_cli("new", "triple", "--root", str(root))
    assert result.exit_code == 0, result.stderr
    return root


def test_new_scaffolds_a_spec_a_solution_and_a_wrong_variant_that_validate(scaffold: Path):
    spec = scaffold / "exercises" / "triple.yaml"
    assert spec.is_file()
    assert (scaffold / "solutions" / "triple.py").is_file()
    assert (scaffold / "solutions" / "wrong" / "triple" / "forgets_grad_output.py").is_file()
    assert "every field is documented" in spec.read_text()
    result = run_cli("validate", str(spec))
    assert result.exit_code == 0, result.stdout


def test_new_never_overwrites_and_refuses_a_bad_id(scaffold: Path):
    again = run_cli("new", "triple", "--root", str(scaffold))
    assert again.exit_code == 2
    assert "already exists: nothing was written" in again.stderr
    bad = run_cli("new", "Bad-Id", "--root", str(scaffold))
    assert bad.exit_code == 2
    assert "is not a valid id" in bad.stderr


def test_validate_reports_a_wrong_solution_a_passing_stub_and_a_misdeclared_variant(scaffold: Path):
    spec = scaffold / "exercises" / "triple.yaml"
    (scaffold / "solutions" / "triple.py").write_text(
        (scaffold / "solutions" / "triple.py")
        .read_text()
        .replace("return 3 * grad_output", "return 2 * grad_output")
    )
    text = spec.read_text()
    text = text.replace(
        'raise NotImplementedError("backward() is not written yet")', "return 3 * grad_output"
    )
    text = text.replace("mistake: no_grad_output", "mistake: sign_flipped")
    spec.write_text(text)
    result = run_cli("validate", str(spec), "--json")
    assert result.exit_code == 1
    (found,) = result.json()["specs"]
    assert found["ok"] is False
    problems = "\n".join(found["problems"])
    assert "the reference solution fails at backward" in problems
    assert "the untouched stub passes every stage" in problems
    assert "expected backward/sign_flipped, got backward/no_grad_output" in problems


def test_validate_reports_a_broken_spec_by_file_and_field(tmp_path: Path):
    spec = tmp_path / "exercises" / "broken.yaml"
    spec.parent.mkdir()
    spec.write_text("format_version: 1\nid: broken\n")
    result = run_cli("validate", str(spec), "--json")
    assert result.exit_code == 1
    assert "is required but missing" in result.json()["specs"][0]["problems"][0]


def test_an_extra_exercises_folder_adds_its_exercises(scaffold: Path, monkeypatch):
    with_option = run_cli("--exercises-dir", str(scaffold), "list")
    assert with_option.exit_code == 0
    assert "triple" in with_option.stdout
    monkeypatch.setenv("TRAINER_EXERCISES", str(scaffold / "exercises"))
    assert "triple" in run_cli("list").stdout
    started = run_cli("start", "triple")
    assert started.exit_code == 0


def test_clashing_exercise_ids_are_an_error_naming_both_files(tmp_path: Path):
    root = tmp_path / "clash"
    (root / "exercises").mkdir(parents=True)
    (root / "exercises" / "sigmoid.yaml").write_text(
        (REPO / "exercises" / "sigmoid.yaml").read_text()
    )
    result = run_cli("--exercises-dir", str(root), "list")
    assert result.exit_code == 2
    assert "the exercise id `sigmoid` is defined twice" in result.stderr
    assert str(root / "exercises" / "sigmoid.yaml") in result.stderr
    assert "exercises/sigmoid.yaml and" in result.stderr


def test_an_exercises_folder_that_holds_none_is_a_usage_error(tmp_path: Path):
    result = run_cli("--exercises-dir", str(tmp_path), "list")
    assert result.exit_code == 2
    assert "holds no exercises" in result.stderr
