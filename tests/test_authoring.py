"""Authoring: validate, new, extra exercise folders."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

import trainer.authoring
from tests.conftest import CATALOG, REPO, run_cli, shared_service
from trainer.authoring import Validation, content_warnings_by_id, shared_quiz_paths
from trainer.checking.report import Verdict
from trainer.spec import load_exercise

SPECS = CATALOG.spec_paths()

# What validate and new say, on the worker's warm checking server.
pytestmark = pytest.mark.usefixtures("warm_commands")


@pytest.mark.parametrize("spec", SPECS, ids=lambda path: path.stem)
def test_each_spec_of_the_catalogue_validates_and_its_stub_fails_for_want_of_a_backward(
    spec: Path,
):
    """What `trainer validate` does for each spec of the catalogue (the command's own
    run over the whole catalogue is below), one spec a test so that the workers share
    the catalogue: the schema holds, the stub fails, the reference passes, each wrong
    variant fails at its declared stage with its declared mistake. Its questions are
    compared with the rest of the catalogue's once, in the next test."""
    (result,) = trainer.authoring.validate(
        [(spec, CATALOG.display_name(spec))], service=shared_service()
    )
    assert result.ok, result.problems
    assert result.warnings == []
    assert result.variants and all(v.ok for v in result.variants)
    # The untouched stub fails because backward is not written: it loads, forward works.
    assert result.stub_report is not None
    report = result.stub_report
    assert not report.passed
    verdicts = {s.id: s.verdict for s in report.stages}
    assert verdicts["load"] is Verdict.PASS
    assert verdicts["forward"] is Verdict.PASS
    backward = next(s for s in report.stages if s.id == "backward")
    assert backward.message.startswith("backward() is not written yet")


@pytest.mark.parametrize(
    ("exercise_id", "variant", "stage_id"),
    [
        ("sigmoid", "forgets_grad_output.py", "backward"),
        ("broadcast_matmul", "not_summed_over_broadcast.py", "contract"),
    ],
)
def test_a_wrong_variant_checked_for_validate_stops_at_its_first_failing_run(
    exercise_id: str, variant: str, stage_id: str
):
    """validate reads a variant's first failure only (its stage, its mistake): the
    stage stops there, and names the same failure a full check names first."""
    from trainer.checking.runner import run_check

    exercise = CATALOG.get(exercise_id)
    file = REPO / "solutions" / "wrong" / exercise_id / variant
    reports = [
        run_check(
            exercise,
            file,
            service=shared_service(),
            solution=REPO / "solutions" / f"{exercise_id}.py",
            catalogue_file=True,
            stop_after_failure=stop,
        )
        for stop in (False, True)
    ]
    full, first = (report.first_failure for report in reports)
    assert full is not None and first is not None
    assert full.id == first.id == stage_id
    assert full.diagnosis == first.diagnosis and full.case == first.case
    assert any(d.startswith(("fails in all", "also fails for")) for d in full.details)
    assert not any(d.startswith(("fails in all", "also fails for")) for d in first.details)


def test_the_catalogue_breaks_no_content_rule_against_itself_and_its_shared_quizzes():
    """The content rules `trainer validate` applies over the whole catalogue: no
    question a near-copy of another spec's or of a shared quiz's, among the rest."""
    exercises = [load_exercise(path) for path in SPECS]
    warnings = content_warnings_by_id(exercises, SPECS, shared_quiz_paths(CATALOG.roots))
    assert {e.id for e in exercises} == set(warnings)
    assert {name: found for name, found in warnings.items() if found} == {}


def test_validate_without_paths_validates_the_whole_catalogue_and_exits_0(
    monkeypatch: pytest.MonkeyPatch,
):
    """The command validates every spec of the catalogue (each one's checks are the test
    above), compares questions across it and its shared quizzes, and exits 0 with
    ``ok`` when every spec holds."""
    calls: list[dict[str, Any]] = []

    def validate(specs: Any, **options: Any) -> list[Validation]:
        calls.append({"specs": list(specs), **options})
        return [Validation(spec=name, exercise_id=Path(name).stem) for _, name in specs]

    monkeypatch.setattr(trainer.authoring, "validate", validate)
    result = run_cli("validate", "--json")
    assert result.exit_code == 0, result.stdout
    document = result.json()
    assert document["ok"] is True
    assert len(document["specs"]) == len(SPECS) >= 3
    (call,) = calls
    assert [path for path, _ in call["specs"]] == SPECS
    assert [name for _, name in call["specs"]] == [CATALOG.display_name(p) for p in SPECS]
    assert list(call["catalogue"]) == SPECS
    assert list(call["shared_quizzes"]) == shared_quiz_paths(CATALOG.roots)


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


AUTOGRAD_STUB = """\
import torch


class MyTriple(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return 3 * x

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        with torch.enable_grad():
            leaf = x.detach().requires_grad_()
            (grad,) = torch.autograd.grad(3 * leaf, leaf, grad_output)
        return grad
"""


def test_validate_fails_a_spec_whose_stub_passes_a_stage_worth_points(scaffold: Path):
    """A stub whose backward is right but calls autograd fails by_hand and passes the
    other stages: a grade would give it their points for nothing."""
    spec = scaffold / "exercises" / "triple.yaml"
    data = yaml.safe_load(spec.read_text())
    data["stub"] = AUTOGRAD_STUB
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    result = run_cli("validate", str(spec), "--json")
    assert result.exit_code == 1, result.stdout
    (found,) = result.json()["specs"]
    weights = load_exercise(spec).stage_weights()
    earned = ("backward", "contract", "state", "stability", "gradcheck")
    points = sum(weights[stage] for stage in earned)
    assert found["problems"] == [
        f"the untouched stub earns {points} points in a grade (it passes {', '.join(earned)}): "
        "make the stub fail those stages, or give them weight 0 (weights:)"
    ]


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
