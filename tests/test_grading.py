"""Grading a class: verdicts, scores, formats, feedback levels, shards."""

from __future__ import annotations

import json
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from tests.conftest import REPO, run_cli

GOOD = (REPO / "solutions" / "sigmoid.py").read_text()
WRONG = GOOD.replace("grad_output * output * (1 - output)", "output * (1 - output)")
HANGS = GOOD.replace(
    "(output,) = ctx.saved_tensors",
    "(output,) = ctx.saved_tensors\n        while True:\n            pass",
)
CRASHES = GOOD.replace(
    "(output,) = ctx.saved_tensors",
    "(output,) = ctx.saved_tensors\n        import os\n        os._exit(3)",
)


@pytest.fixture
def classroom(tmp_path: Path) -> Path:
    folder = tmp_path / "submissions"
    (folder / "team").mkdir(parents=True)
    (folder / "alice.py").write_text(GOOD)
    (folder / "bob.py").write_text(WRONG)
    (folder / "carol.py").write_text(HANGS)
    (folder / "team" / "dave.py").write_text(CRASHES)
    (folder / "erin.py").write_text("def broken(:\n")
    (folder / "notes.txt").write_text("not a submission")
    return folder


def test_grade_gives_each_submission_its_verdict_and_survives_hangs_and_crashes(
    classroom, tmp_path
):
    junit = tmp_path / "grades.xml"
    started = time.monotonic()
    result = run_cli(
        "grade", "sigmoid", str(classroom), "--json", "--junit", str(junit), "--timeout", "4"
    )
    elapsed = time.monotonic() - started
    assert result.exit_code == 0, result.stderr
    grades = {Path(g["submission"]).name: g for g in json.loads(result.stdout)["grades"]}
    assert set(grades) == {"alice.py", "bob.py", "carol.py", "dave.py", "erin.py"}
    assert grades["alice.py"]["verdict"] == "pass"
    assert grades["bob.py"]["verdict"] == "fail" and grades["bob.py"]["stage"] == "backward"
    assert grades["carol.py"]["verdict"] == "fail" and "timed out" in grades["carol.py"]["message"]
    assert (
        grades["dave.py"]["verdict"] == "fail"
        and "exited with code 3" in grades["dave.py"]["message"]
    )
    assert grades["erin.py"]["verdict"] == "fail" and grades["erin.py"]["stage"] == "load"
    assert elapsed < 30

    suite = ElementTree.parse(junit).getroot().find("testsuite")
    assert suite is not None
    assert suite.get("tests") == "5" and suite.get("failures") == "4"
    assert len(suite.findall("testcase/failure")) == 4


def test_grade_prints_a_summary_table(classroom):
    result = run_cli("grade", "sigmoid", str(classroom / "alice.py"), str(classroom / "bob.py"))
    assert result.exit_code == 0
    assert "1 of 2 submissions passed." in result.stdout


def test_grade_with_a_missing_path_is_a_usage_error(tmp_path: Path):
    result = run_cli("grade", "sigmoid", str(tmp_path / "nope"))
    assert result.exit_code == 2
    assert "no file or folder at" in result.stderr
