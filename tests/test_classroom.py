"""GitHub Classroom: the workflow and autograding.json `classroom init` writes, and the
results `classroom result` gives Classroom's reporter."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import CATALOG, REPO, run_cli
from trainer.catalog import Catalog
from trainer.classroom import decode_output, read_report
from trainer.gradebook import grade_of
from trainer.vocabulary import STAGE_BY_ID
from trainer.wheel import wheel_name

GOOD = (REPO / "solutions" / "sigmoid.py").read_text()
WRONG = GOOD.replace("grad_output * output * (1 - output)", "output * (1 - output)")
WORKFLOW = Path(".github/workflows/classroom.yml")
AUTOGRADING = Path(".github/classroom/autograding.json")


def maximum(weights: dict[str, int]) -> int:
    """A passing submission's points on a machine without a GPU, from the weights alone."""
    return sum(w for stage, w in weights.items() if not STAGE_BY_ID[stage].may_skip_in_a_pass)


def steps_of(repo: Path) -> list[dict[str, Any]]:
    document = yaml.safe_load((repo / WORKFLOW).read_text())
    steps: list[dict[str, Any]] = document["jobs"]["run-autograding-tests"]["steps"]
    return steps


def step_of(repo: Path, exercise_id: str) -> dict[str, Any]:
    return next(step for step in steps_of(repo) if step.get("id") == exercise_id)


def run_step(repo: Path, exercise_id: str, tmp_path: Path) -> dict[str, Any]:
    """Run the exercise's step of the workflow as the runner would (bash -e, the step's
    `run`, $GITHUB_OUTPUT a file) and decode the one output it writes."""
    output = tmp_path / f"github-output-{exercise_id}"
    output.write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINER_")}
    env |= {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        "PYTHONPATH": str(REPO),  # this checkout's trainer
        "GITHUB_OUTPUT": str(output),
    }
    script = step_of(repo, exercise_id)["run"]
    done = subprocess.run(
        ["bash", "-e", "-c", script], cwd=repo, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    lines = output.read_text().splitlines()
    assert len(lines) == 1 and lines[0].startswith("result="), lines  # one output, well formed
    return decode_output(lines[0])


def score(result: dict[str, Any]) -> int:
    """What the reporter adds up for Classroom: every test's score."""
    return sum(test["score"] for test in result["tests"])


@pytest.fixture
def student_repo(tmp_path: Path) -> Path:
    """A student's repository: the workflow for sigmoid, and the scratch file where
    `trainer check` run from the repository's top finds it."""
    repo = tmp_path / "student"
    repo.mkdir()
    assert run_cli("classroom", "init", "sigmoid", "--dir", str(repo)).exit_code == 0
    assert run_cli("-w", str(repo / "trainer-workspace"), "start", "sigmoid").exit_code == 0
    return repo


# init


def test_the_workflow_is_autograding_tests_with_a_step_per_exercise_that_the_reporter_reads(
    tmp_path: Path,
):
    result = run_cli("classroom", "init", "sigmoid", "relu", "linear", "--dir", str(tmp_path))
    assert result.exit_code == 0, result.stderr
    document = yaml.safe_load((tmp_path / WORKFLOW).read_text())
    assert document["name"] == "Autograding Tests"
    assert set(document["on"]) == {"push", "repository_dispatch"}
    job = document["jobs"]["run-autograding-tests"]
    assert job["if"] == "github.actor != 'github-classroom[bot]'"
    ids = ["sigmoid", "relu", "linear"]
    steps = job["steps"]
    assert [s["id"] for s in steps if "id" in s] == ids
    for exercise_id in ids:
        script = step_of(tmp_path, exercise_id)["run"]
        assert f"trainer check {exercise_id} --json" in script
        assert f"trainer classroom result {exercise_id} " in script
        assert '>> "$GITHUB_OUTPUT"' in script
    reporter = steps[-1]
    assert reporter["uses"] == "classroom-resources/autograding-grading-reporter@v1"
    assert reporter["with"]["runners"].split(",") == ids
    assert reporter["env"] == {
        f"{i.upper()}_RESULTS": f"${{{{ steps.{i}.outputs.result }}}}" for i in ids
    }
    python = next(s for s in steps if s.get("uses", "").startswith("actions/setup-python"))
    assert python["with"]["python-version"] == "3.11"  # a string, not the float 3.11
    torch = next(s for s in steps if s.get("name") == "Install a CPU build of torch")["run"]
    assert "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" in torch


def test_init_puts_this_trainers_wheel_in_the_repository_and_the_workflow_installs_that_file(
    tmp_path: Path,
):
    result = run_cli("classroom", "init", "sigmoid", "--dir", str(tmp_path))
    assert result.exit_code == 0, result.stderr
    (wheel,) = (tmp_path / ".github" / "classroom").glob("*.whl")
    assert wheel.name == wheel_name() and zipfile.is_zipfile(wheel)
    install = next(s for s in steps_of(tmp_path) if s.get("name") == "Install the trainer")
    assert install["run"] == f"pip install .github/classroom/{wheel.name}\n"
    setup = json.loads((tmp_path / AUTOGRADING).read_text())["tests"][0]["setup"]
    assert setup.endswith(f".trainer-venv/bin/pip install .github/classroom/{wheel.name}")
    assert "autograd-trainer" not in (tmp_path / WORKFLOW).read_text()  # on no index

    other = tmp_path / "other"
    other.mkdir()
    given = "git+https://github.com/me/trainer@v1"
    assert (
        run_cli("classroom", "init", "sigmoid", "--dir", str(other), "--install", given).exit_code
        == 0
    )
    install = next(s for s in steps_of(other) if s.get("name") == "Install the trainer")
    assert install["run"] == f"pip install {given}\n"
    assert not list(other.rglob("*.whl"))


def test_autograding_json_gives_each_exercise_the_maximum_its_weights_allow(tmp_path: Path):
    repo = tmp_path / "repo"
    folder = repo / "my-ex"
    assert run_cli("new", "triple", "--root", str(folder)).exit_code == 0
    spec = folder / "exercises" / "triple.yaml"
    # A weighted CUDA stage: GitHub's runners have no GPU, so it is not in the maximum.
    spec.write_text(spec.read_text() + "weights:\n  cuda: 3\n  backward: 6\n")
    result = run_cli(
        "classroom", "init", "sigmoid", "linear", "triple", "--dir", str(repo),
        "--exercises-dir", str(folder),
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    tests = json.loads((repo / AUTOGRADING).read_text())["tests"]
    points = {test["run"].split()[2]: test["points"] for test in tests}
    triple = Catalog([REPO, folder]).get("triple")
    assert points == {
        "sigmoid": maximum(CATALOG.get("sigmoid").stage_weights()),
        "linear": maximum(CATALOG.get("linear").stage_weights()),
        "triple": maximum(triple.stage_weights()),
    }
    assert points["triple"] == sum(triple.stage_weights().values()) - 3
    for test in tests:
        assert test["run"].endswith(("check sigmoid", "check linear", "--exercises-dir my-ex"))
        assert test["output"] == "" and test["input"] == ""  # the exit code decides
    assert tests[0]["setup"] and not tests[1]["setup"]  # installed once, by the first
    flat = " ".join(result.stdout.split())
    for exercise_id, total in points.items():
        assert f"{exercise_id}: {total} points" in flat


def test_exercises_from_a_folder_in_the_repository_are_found_by_every_workflow_command(
    tmp_path: Path,
):
    repo = tmp_path / "repo"
    folder = repo / "course" / "my-ex"
    assert run_cli("new", "triple", "--root", str(folder)).exit_code == 0
    args = ("classroom", "init", "triple", "--dir", str(repo), "--exercises-dir", str(folder))
    assert run_cli(*args).exit_code == 0, run_cli(*args).stderr
    script = step_of(repo, "triple")["run"]
    assert "trainer check triple --exercises-dir course/my-ex --json" in script
    assert (
        "trainer classroom result triple .trainer-results/triple.json --exercises-dir course/my-ex"
        in script
    )


def test_an_exercise_from_a_folder_outside_the_repository_is_refused(tmp_path: Path):
    folder = tmp_path / "elsewhere"
    assert run_cli("new", "triple", "--root", str(folder)).exit_code == 0
    repo = tmp_path / "repo"
    repo.mkdir()
    result = run_cli(
        "classroom", "init", "triple", "--dir", str(repo), "--exercises-dir", str(folder)
    )
    assert result.exit_code == 2
    assert "outside" in result.stderr and str(folder) in result.stderr
    assert not (repo / ".github").exists()


def test_init_never_overwrites_a_file_without_force(tmp_path: Path):
    (tmp_path / WORKFLOW).parent.mkdir(parents=True)
    (tmp_path / WORKFLOW).write_text("mine\n")
    result = run_cli("classroom", "init", "sigmoid", "--dir", str(tmp_path))
    assert result.exit_code == 2
    assert "classroom.yml exists already" in result.stderr and "--force" in result.stderr
    assert (tmp_path / WORKFLOW).read_text() == "mine\n"
    assert not (tmp_path / AUTOGRADING).exists()  # nothing written at all
    forced = run_cli("classroom", "init", "sigmoid", "--dir", str(tmp_path), "--force")
    assert forced.exit_code == 0, forced.stderr
    assert yaml.safe_load((tmp_path / WORKFLOW).read_text())["name"] == "Autograding Tests"


def test_init_with_an_unknown_exercise_writes_nothing(tmp_path: Path):
    result = run_cli("classroom", "init", "sigmoid", "sigmiod", "--dir", str(tmp_path))
    assert result.exit_code == 2
    assert "no exercise called `sigmiod`" in result.stderr
    assert not (tmp_path / ".github").exists()


# The workflow's steps, end to end


def test_the_step_gives_a_right_backward_every_point(student_repo: Path, tmp_path: Path):
    (student_repo / "trainer-workspace" / "sigmoid.py").write_text(GOOD)
    result = run_step(student_repo, "sigmoid", tmp_path)
    assert result["version"] == 1
    assert result["status"] == "pass"
    assert all(test["status"] == "pass" for test in result["tests"])
    assert score(result) == result["max_score"] == maximum(CATALOG.get("sigmoid").stage_weights())


def test_the_step_gives_a_wrong_backward_the_points_of_the_stages_it_passed(
    student_repo: Path, tmp_path: Path
):
    (student_repo / "trainer-workspace" / "sigmoid.py").write_text(WRONG)
    result = run_step(student_repo, "sigmoid", tmp_path)
    assert result["status"] == "fail"
    assert 0 < score(result) < result["max_score"]
    # Exactly `trainer grade`'s points, from the report the step kept.
    exercise = CATALOG.get("sigmoid")
    report = read_report(student_repo / ".trainer-results" / "sigmoid.json", "sigmoid")
    grade = grade_of(exercise, "sigmoid.py", 0, report)
    assert (score(result), result["max_score"]) == (grade.score, grade.max_score)
    by_name = {test["name"]: test for test in result["tests"]}
    backward = by_name["sigmoid: Backward parity"]
    assert backward["status"] == "fail" and backward["score"] == 0
    assert "grad_output" in backward["message"]
    assert by_name["sigmoid: Backward contract"]["score"] == 1  # its weight
    forward = by_name["sigmoid: Forward parity"]  # passed, but it comes with the stub
    assert (forward["status"], forward["score"]) == ("pass", 0)


def test_the_step_gives_the_untouched_stub_0_points_of_a_maximum_the_learner_must_earn(
    student_repo: Path, tmp_path: Path
):
    result = run_step(student_repo, "sigmoid", tmp_path)
    passed = [test["name"] for test in result["tests"] if test["status"] == "pass"]
    assert passed == ["sigmoid: Load and structure", "sigmoid: Forward parity"]
    assert score(result) == 0
    points = json.loads((student_repo / AUTOGRADING).read_text())["tests"][0]["points"]
    weights = CATALOG.get("sigmoid").stage_weights()
    earned = sum(w for s, w in weights.items() if s not in ("load", "forward", "cuda"))
    assert result["max_score"] == points == earned > 0


def test_the_step_gives_a_scratch_file_linked_to_the_reference_0_points_and_a_flag(
    student_repo: Path, tmp_path: Path
):
    scratch = student_repo / "trainer-workspace" / "sigmoid.py"
    scratch.unlink()
    scratch.symlink_to(REPO / "solutions" / "sigmoid.py")
    result = run_step(student_repo, "sigmoid", tmp_path)
    assert (result["status"], score(result)) == ("error", 0)
    assert result["max_score"] == maximum(CATALOG.get("sigmoid").stage_weights())
    assert result["flags"] == [
        {"kind": "symlink", "matched": str(REPO / "solutions" / "sigmoid.py")}
    ]
    assert all("not graded: a symlink to" in test["message"] for test in result["tests"])
    assert "grad_output * output" not in json.dumps(result)  # nothing of the reference


def test_the_step_reports_a_missing_scratch_file_as_an_error_worth_nothing(
    student_repo: Path, tmp_path: Path
):
    (student_repo / "trainer-workspace" / "sigmoid.py").unlink()
    result = run_step(student_repo, "sigmoid", tmp_path)
    assert result["status"] == "error"
    assert score(result) == 0
    assert result["max_score"] == maximum(CATALOG.get("sigmoid").stage_weights())
    assert all(test["status"] != "pass" for test in result["tests"])
    assert "trainer-workspace/sigmoid.py" in result["tests"][0]["message"]


def test_an_exercise_from_the_repository_is_checked_and_scored_with_its_own_weights(
    tmp_path: Path,
):
    repo = tmp_path / "student"
    folder = repo / "my-ex"
    assert run_cli("new", "triple", "--root", str(folder)).exit_code == 0
    spec = folder / "exercises" / "triple.yaml"
    spec.write_text(spec.read_text() + "weights:\n  backward: 9\n")
    args = ("--exercises-dir", str(folder))
    assert run_cli("classroom", "init", "triple", "--dir", str(repo), *args).exit_code == 0
    workspace = repo / "trainer-workspace"
    assert run_cli("-w", str(workspace), "start", "triple", *args).exit_code == 0
    shutil.copy(folder / "solutions" / "triple.py", workspace / "triple.py")
    (workspace / ".trainer-settings.json").unlink()  # the workflow's options must find it
    result = run_step(repo, "triple", tmp_path)
    assert result["status"] == "pass", result
    weights = Catalog([REPO, folder]).get("triple").stage_weights()
    assert weights["backward"] == 9
    assert score(result) == result["max_score"] == maximum(weights)


# result


def _report(tmp_path: Path) -> Path:
    return tmp_path / "report.json"


SIGMOID_STAGES = list(CATALOG.get("sigmoid").stage_weights())


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (None, "there is no report"),
        ("", "wrote no report"),
        ('{"exercise": "sigmoid", "stages": [{"id": "load", "verd', "not JSON"),
        ("[1, 2]", "not a JSON object"),
        ('{"exercise": "relu", "stages": [{"id": "load", "verdict": "pass"}]}', "'relu'"),
        ('{"exercise": "sigmoid", "stages": []}', "no stages"),
        ('{"exercise": "sigmoid", "stages": [{"id": "load", "seconds": "soon"}]}', "soon"),
        ('{"exercise": "sigmoid", "stages": "all passed", "passed": true}', "no stages"),
    ],
    ids=["missing", "empty", "truncated", "not-an-object", "other-exercise", "no-stages",
         "bad-value", "stages-not-a-list"],
)  # fmt: skip
def test_result_of_a_report_that_cannot_be_read_is_an_error_never_a_pass(
    content: str | None, why: str, tmp_path: Path
):
    if content is not None:
        _report(tmp_path).write_text(content)
    result = run_cli("classroom", "result", "sigmoid", str(_report(tmp_path)))
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 1
    document = decode_output(lines[0])
    assert document["status"] == "error"
    assert score(document) == 0
    assert document["max_score"] == sum(CATALOG.get("sigmoid").stage_weights().values())
    assert [t["name"] for t in document["tests"]] == [
        f"sigmoid: {STAGE_BY_ID[s].title}" for s in SIGMOID_STAGES
    ]
    assert all(t["status"] == "error" and why in t["message"] for t in document["tests"])
    assert why in result.stderr  # and the step's log says it too


def test_result_passes_only_a_report_where_every_stage_passed(tmp_path: Path):
    # The required stages pass, which makes the report "passed", but gradcheck is missing.
    stages = [{"id": s, "verdict": "pass"} for s in SIGMOID_STAGES if s != "gradcheck"]
    _report(tmp_path).write_text(json.dumps({"exercise": "sigmoid", "stages": stages}))
    result = run_cli("classroom", "result", "sigmoid", str(_report(tmp_path)))
    document = decode_output(result.stdout)
    assert document["status"] == "fail"
    weights = CATALOG.get("sigmoid").stage_weights()
    assert score(document) == maximum(weights) - weights["gradcheck"]
    assert document["max_score"] == maximum(weights)


def test_result_leaves_out_a_stage_skipped_for_want_of_a_gpu(tmp_path: Path):
    stages = [
        {"id": s, "verdict": "skip" if s == "cuda" else "pass", "message": "skipped: no GPU"}
        for s in SIGMOID_STAGES
    ]
    _report(tmp_path).write_text(json.dumps({"exercise": "sigmoid", "stages": stages}))
    document = decode_output(
        run_cli("classroom", "result", "sigmoid", str(_report(tmp_path))).stdout
    )
    assert document["status"] == "pass"
    assert "sigmoid: CUDA" not in [t["name"] for t in document["tests"]]
    assert score(document) == document["max_score"]


def test_result_prints_only_its_output_line_on_stdout_when_an_interview_runs_out(
    tmp_path: Path, isolated_workspace: Path
):
    assert run_cli("interview", "sigmoid", "--minutes", "1").exit_code == 0
    state = isolated_workspace / ".trainer-state.json"
    data = json.loads(state.read_text())
    data["interview"]["started_at"] -= 3600  # its time ran out an hour ago
    state.write_text(json.dumps(data))
    result = run_cli("classroom", "result", "sigmoid", str(_report(tmp_path)))
    assert "time up" in result.stderr  # the interview's summary, in the log
    assert len(result.stdout.splitlines()) == 1
    assert decode_output(result.stdout)["status"] == "error"


PROBE = """
import json, sys
from trainer.cli import main
sys.argv = ["trainer", *json.loads(sys.argv[1])]
try:
    main()
except SystemExit:
    pass
print("torch" in sys.modules)
"""


def test_result_does_not_import_torch(tmp_path: Path):
    report = tmp_path / "report.json"
    report.write_text(
        json.dumps({"exercise": "sigmoid", "stages": [{"id": "load", "verdict": "pass"}]})
    )
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(["classroom", "result", "sigmoid", str(report)])],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={
            "TRAINER_WORKSPACE": str(tmp_path / "ws"),
            "PATH": "/usr/bin:/bin",
            "PYTHONPATH": str(REPO),
        },
        check=False,
    )
    lines = done.stdout.splitlines()
    assert lines[0].startswith("result="), done.stderr
    assert lines[-1] == "False"


def test_the_readme_recipe_commits_the_workflow_and_the_stubs_but_not_the_workspace_bookkeeping(
    tmp_path: Path,
):
    repo = tmp_path / "template"
    repo.mkdir()
    git = ["git", "-C", str(repo)]
    subprocess.run([*git, "init", "-q"], check=True)
    assert run_cli("classroom", "init", "sigmoid", "relu", "--dir", str(repo)).exit_code == 0
    workspace = repo / "trainer-workspace"
    for exercise_id in ("sigmoid", "relu"):
        assert run_cli("-w", str(workspace), "start", exercise_id).exit_code == 0
    assert (workspace / ".trainer-state.json").is_file()
    assert (workspace / ".trainer-state.lock").is_file()
    subprocess.run([*git, "add", ".github", "trainer-workspace"], check=True)
    staged = subprocess.run(
        [*git, "diff", "--cached", "--name-only"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert {name for name in staged if name.startswith("trainer-workspace/")} == {
        "trainer-workspace/.gitignore",
        "trainer-workspace/sigmoid.py",
        "trainer-workspace/relu.py",
    }
