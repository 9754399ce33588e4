"""Grading a class: verdicts, scores, formats, feedback levels, shards."""

from __future__ import annotations

import csv
import functools
import hashlib
import json
import re
import time
import xml.etree.ElementTree as ElementTree
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from tests.conftest import CATALOG, REPO, run_cli, shared_service
from trainer.checking.feedback import with_feedback
from trainer.checking.report import CheckReport, StageResult, Verdict
from trainer.checking.runner import run_check
from trainer.errors import SpecError
from trainer.gradebook import grade_of
from trainer.grading import shard_of
from trainer.spec import Exercise, exercise_from_mapping
from trainer.vocabulary import MISTAKES, STAGE_BY_ID
from trainer.workspace import scratch_text

GOOD = (REPO / "solutions" / "sigmoid.py").read_text()
WRONG = GOOD.replace("grad_output * output * (1 - output)", "output * (1 - output)")
# A hang that waits, not spins: the timeout is the same, and the suite's CPU is spared.
HANGS = GOOD.replace(
    "(output,) = ctx.saved_tensors",
    "(output,) = ctx.saved_tensors\n        import time\n        time.sleep(3600)",
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
        "grade", "sigmoid", str(classroom), "--json", "--junit", str(junit), "--timeout", "2.5"
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

    suites = {Path(s.get("name", "")).name: s for s in ElementTree.parse(junit).getroot()}
    assert set(suites) == set(grades)
    assert not suites["alice.py"].findall("testcase/failure")
    for name in ("bob.py", "carol.py", "dave.py", "erin.py"):
        assert suites[name].findall("testcase/failure"), name


@pytest.mark.usefixtures("warm_commands")
def test_grade_prints_a_table_with_each_score_and_stage(classroom):
    result = run_cli("grade", "sigmoid", str(classroom / "alice.py"), str(classroom / "bob.py"))
    assert result.exit_code == 0
    weights = CATALOG.get("sigmoid").stage_weights()
    full = sum(weights.values()) - weights["cuda"]
    assert re.search(rf"alice\.py.*pass.*{full}/{full}.*✔+", result.stdout)
    assert re.search(rf"bob\.py.*fail.*\d+/{full}.*✔+✘", result.stdout)
    assert "Stages, in order: Load and structure, Forward parity" in result.stdout
    assert "1 of 2 submissions passed." in result.stdout


def test_grade_with_a_missing_path_is_a_usage_error(tmp_path: Path):
    result = run_cli("grade", "sigmoid", str(tmp_path / "nope"))
    assert result.exit_code == 2
    assert "no file or folder at" in result.stderr


# Partial credit -------------------------------------------------------------------


def _report(verdicts: dict[str, str]) -> CheckReport:
    stages = [StageResult(i, Verdict(v), f"{i} said {v}") for i, v in verdicts.items()]
    return CheckReport("sigmoid", "s.py", "0" * 64, 0, stages)


def test_a_score_is_the_sum_of_the_weights_of_the_passed_stages():
    exercise = CATALOG.get("sigmoid")
    weights = exercise.stage_weights()
    verdicts = {stage: "pass" for stage in weights} | {"backward": "fail", "cuda": "skip"}
    grade = grade_of(exercise, "s.py", 0, _report(verdicts))
    assert grade.score == sum(w for s, w in weights.items() if s not in ("backward", "cuda"))
    assert grade.max_score == sum(w for s, w in weights.items() if s != "cuda")
    assert {s.id: s.points for s in grade.stages}["backward"] == 0
    assert grade.verdict == "fail" and grade.stage == "backward"


def test_a_stage_that_never_ran_scores_nothing_but_counts_in_the_maximum():
    exercise = CATALOG.get("sigmoid")
    weights = exercise.stage_weights()
    grade = grade_of(exercise, "s.py", 0, _report({"load": "pass", "forward": "skip"}))
    assert grade.score == weights["load"]
    assert grade.max_score == sum(weights.values())  # the CUDA stage never said it skipped
    missing = next(s for s in grade.stages if s.id == "gradcheck")
    assert (missing.verdict, missing.points, missing.counted) == ("fail", 0, True)


def test_a_spec_sets_stage_weights_and_its_grade_follows_them():
    spec = yaml.safe_load((REPO / "exercises" / "sigmoid.yaml").read_text())
    spec["weights"] = {"backward": 10, "load": 0, "cuda": 3}
    exercise = exercise_from_mapping(spec, "sigmoid.yaml")
    weights = exercise.stage_weights()
    assert (weights["backward"], weights["load"], weights["cuda"]) == (10, 0, 3)
    assert weights["gradcheck"] == STAGE_BY_ID["gradcheck"].weight
    verdicts = {stage: "pass" for stage in weights} | {"cuda": "skip", "gradcheck": "fail"}
    grade = grade_of(exercise, "s.py", 0, _report(verdicts))
    assert grade.max_score == sum(weights.values()) - 3  # no GPU here: CUDA is not counted
    assert grade.max_score - grade.score == STAGE_BY_ID["gradcheck"].weight
    on_a_gpu = grade_of(exercise, "s.py", 0, _report(verdicts | {"cuda": "pass"}))
    assert on_a_gpu.max_score == sum(weights.values()) == on_a_gpu.score + weights["gradcheck"]


@pytest.mark.parametrize(
    ("weights", "problem"),
    [
        ({"backwards": 2}, "weights.backwards: 'backwards' is not a stage"),
        ({"kinks": 2}, "weights.kinks: this exercise has no 'kinks' stage"),
        ({"backward": -1}, "weights.backward: -1 is below the minimum 0"),
        ({"backward": 1.5}, "weights.backward: expected a whole number"),
        ({"forward": 2}, "weights.forward: the stub passes 'forward'"),
        ({s: 0 for s in ("load", "forward", "backward", "contract", "state", "stability",
                         "gradcheck", "by_hand")}, "weights: every stage is worth 0"),
        ([], "weights: expected a mapping of stage ids to points"),
    ],
)  # fmt: skip
def test_a_wrong_weight_is_an_error_naming_the_file_and_field(weights: object, problem: str):
    spec = yaml.safe_load((REPO / "exercises" / "sigmoid.yaml").read_text())
    spec["weights"] = weights
    with pytest.raises(SpecError) as raised:
        exercise_from_mapping(spec, "sigmoid.yaml")
    assert f"sigmoid.yaml: {problem}" in str(raised.value)


@pytest.mark.usefixtures("warm_commands")
def test_an_untouched_stub_scores_0_of_a_maximum_that_counts_only_what_a_learner_earns(
    tmp_path: Path,
):
    exercise = CATALOG.get("sigmoid")
    (tmp_path / "stub.py").write_text(scratch_text(exercise))
    (tmp_path / "right.py").write_text(GOOD)
    result = run_cli(
        "grade", "sigmoid", "--json", str(tmp_path / "stub.py"), str(tmp_path / "right.py")
    )
    assert result.exit_code == 0, result.stderr
    stub, right = json.loads(result.stdout)["grades"]
    passed_by_the_stub = {s["id"] for s in stub["stages"] if s["verdict"] == "pass"}
    assert passed_by_the_stub == {"load", "forward"}
    earned = sum(w for s, w in exercise.stage_weights().items() if s not in passed_by_the_stub)
    assert (stub["score"], stub["max_score"]) == (0, earned - exercise.stage_weights()["cuda"])
    assert right["score"] == right["max_score"] == stub["max_score"] > 0


def test_the_default_weights_are_the_ones_the_docs_give():
    documented = (REPO / "docs" / "spec-format.md").read_text()
    for stage in STAGE_BY_ID.values():
        assert re.search(rf"\| `{stage.id}` \| {stage.weight} \|", documented), stage.id


# Feedback levels ------------------------------------------------------------------


@functools.cache
def _wrong_reports() -> list[tuple[Exercise, CheckReport]]:
    """Full reports of wrong variants that fail at several stages, over several exercises."""
    found = []
    for exercise_id in ("sigmoid", "linear", "softmax", "clipped_relu"):
        exercise = CATALOG.get(exercise_id)
        for variant in exercise.wrong_variants[:2]:
            path = CATALOG.wrong_variant_path(exercise, variant.file)
            found.append((exercise, run_check(exercise, path, service=shared_service())))
    return found


def test_summary_feedback_names_stages_and_mistakes_and_keeps_no_value_of_the_checker():
    for exercise, full in _wrong_reports():
        declared = {name: m.words for name, m in exercise.mistakes.items()}
        summary = with_feedback(full, "summary", declared)
        assert not full.passed and summary.passed == full.passed
        assert summary.feedback == "summary" and not summary.output and not summary.output_by_stage
        words = {**MISTAKES, **declared}
        for before, after in zip(full.stages, summary.stages, strict=True):
            assert (after.id, after.verdict) == (before.id, before.verdict)
            assert not after.details and not after.pictures and not after.case
            checks = STAGE_BY_ID[after.id].checks
            allowed = {checks, f"does not hold: {checks}"}
            if after.id == "load" or after.verdict is Verdict.SKIP:
                allowed.add(before.message)  # the learner's own file, or why it did not run
            mistake = (before.diagnosis or {}).get("mistake")
            if after.verdict is Verdict.FAIL and mistake in words:
                allowed = {f"{m}. Looks like: {words[mistake]}" for m in allowed}
                assert after.diagnosis == {"mistake": mistake, "text": words[mistake]}
            else:
                assert after.diagnosis is None
            assert after.message in allowed, (exercise.id, after.id, after.message)


def test_summary_and_verdict_feedback_drop_what_the_code_printed_and_every_value():
    wrong = StageResult(
        "backward",
        Verdict.FAIL,
        "grad for `x` is wrong at [3]: expected 0.25, got 0.5",
        details=["x[3] = 1.5"],
        diagnosis={"mistake": "constant_factor", "text": "2 times", "view": [{"got": 0.5}]},
        pictures=[{"kind": "slope"}],
        case="case 2 float32",
    )
    full = CheckReport(
        "sigmoid", "s.py", "0" * 64, 0, [wrong], output="printed 0.25\n",
        output_by_stage={"backward|case 2 float32": "printed 0.25"}, output_lines=1,
        notes=["a note"],
    )  # fmt: skip
    for level in ("summary", "verdict"):
        shown = with_feedback(full, level)
        assert shown.output == "" and shown.output_by_stage == {}, level
        assert "0.25" not in json.dumps(shown.to_dict()) and "0.5" not in json.dumps(
            shown.to_dict()
        )
        assert shown.output_lines == 1  # how much it printed is no value of the checker's
    assert with_feedback(full, "summary").notes == ["a note"]
    assert with_feedback(full, "full") == replace(full, feedback="full")


def test_no_summary_wording_holds_a_number():
    texts = [s.checks for s in STAGE_BY_ID.values()] + list(MISTAKES.values())
    for text in texts:
        assert text and not re.search(r"\d+\.\d|\d[eE]-?\d|= ?-?\d", text), text


def test_verdict_feedback_says_only_pass_fail_or_skip_per_stage():
    _, full = _wrong_reports()[0]
    verdict = with_feedback(full, "verdict")
    assert [s.verdict for s in verdict.stages] == [s.verdict for s in full.stages]
    words = {Verdict.PASS: "passed", Verdict.FAIL: "failed", Verdict.SKIP: "skipped"}
    for stage in verdict.stages:
        assert stage.message == words[stage.verdict]
        assert not stage.details and stage.diagnosis is None and not stage.pictures
    assert verdict.notes == [] and verdict.output == ""


@pytest.mark.usefixtures("warm_commands")
def test_a_grades_feedback_level_holds_in_its_json_csv_and_junit(classroom, tmp_path: Path):
    files = [str(classroom / "alice.py"), str(classroom / "bob.py")]
    outputs = {}
    for level in ("full", "summary", "verdict"):
        csv_path, junit_path = tmp_path / f"{level}.csv", tmp_path / f"{level}.xml"
        result = run_cli(
            "grade", "sigmoid", *files, "--feedback", level, "--json",
            "--csv", str(csv_path), "--junit", str(junit_path),
        )  # fmt: skip
        assert result.exit_code == 0, result.stderr
        outputs[level] = (result.stdout, csv_path.read_text(), junit_path.read_text())
        assert result.json()["feedback"] == level
    full_message = next(g for g in json.loads(outputs["full"][0])["grades"] if g["stage"])
    assert "grad for `x` is wrong at" in full_message["message"]
    for level in ("summary", "verdict"):
        for text in outputs[level]:
            assert "is wrong at" not in text and "expected" not in text, level
    assert "does not hold: backward gives" in outputs["summary"][1]
    assert "does not hold" not in "".join(outputs["verdict"])


@pytest.mark.usefixtures("warm_commands")
def test_an_exercise_folders_settings_set_the_feedback_check_shows(tmp_path: Path):
    root = tmp_path / "course"
    assert run_cli("new", "triple", "--root", str(root)).exit_code == 0
    variant = next((root / "solutions" / "wrong" / "triple").glob("*.py"))
    check = ("--exercises-dir", str(root), "check", "triple", "--file", str(variant))
    full = run_cli(*check, "--json")
    assert full.json()["feedback"] == "full"
    assert any(s["details"] for s in full.json()["stages"])

    (root / "trainer.yaml").write_text("feedback: verdict\n")
    told = run_cli(*check, "--json")
    assert told.exit_code == 1
    report = told.json()
    assert report["feedback"] == "verdict"
    assert {s["message"] for s in report["stages"]} <= {"passed", "failed", "skipped"}
    shown = run_cli(*check)
    assert shown.exit_code == 1 and "failed" in shown.stdout and "expected" not in shown.stdout
    plot = run_cli("--exercises-dir", str(root), "plot", "triple", "--file", str(variant))
    assert plot.exit_code == 2 and "sets feedback: verdict" in plot.stderr


@pytest.mark.usefixtures("warm_commands")
@pytest.mark.parametrize(
    ("settings", "problem"),
    [
        ("feedback: everything\n", "feedback: 'everything' is not one of: full, summary, verdict"),
        ("feedbak: summary\n", "feedbak: not a setting"),
        ("- summary\n", "expected a mapping of settings"),
        ("feedback: [\n", "cannot be read as YAML"),
    ],
)
def test_a_broken_folder_settings_file_is_a_usage_error_naming_file_and_field(
    tmp_path: Path, settings: str, problem: str
):
    root = tmp_path / "course"
    assert run_cli("new", "triple", "--root", str(root)).exit_code == 0
    (root / "trainer.yaml").write_text(settings)
    stub = root / "solutions" / "triple.py"
    result = run_cli("--exercises-dir", str(root), "check", "triple", "--file", str(stub))
    assert result.exit_code == 2
    assert f"{root / 'trainer.yaml'}: {problem}" in result.stderr


# Shards ---------------------------------------------------------------------------


def test_shards_cover_the_class_exactly_once_and_evenly_for_any_count():
    for size in range(0, 23):
        paths = [Path(f"s{i}.py") for i in range(size)]
        for count in range(1, 8):
            shares = [shard_of(paths, (k, count)) for k in range(1, count + 1)]
            together = sorted(i for share in shares for i, _ in share)
            assert together == list(range(size))
            assert max(map(len, shares)) - min(map(len, shares)) <= 1
            assert all(paths[i] == p for share in shares for i, p in share)


@pytest.mark.usefixtures("warm_commands")
@pytest.mark.parametrize("shard", ["0/3", "4/3", "1", "a/b", "1/0", "-1/2"])
def test_a_bad_shard_is_a_usage_error(classroom, shard: str):
    result = run_cli("grade", "sigmoid", str(classroom / "alice.py"), "--shard", shard)
    assert result.exit_code == 2
    assert "is not K/N with 1 <= K <= N" in result.stderr


def _without_times(data: object) -> object:
    if isinstance(data, dict):
        return {k: _without_times(v) for k, v in data.items() if k not in ("seconds", "time")}
    if isinstance(data, list):
        return [_without_times(v) for v in data]
    return data


@pytest.mark.usefixtures("warm_commands")
def test_merged_shards_give_exactly_the_unsharded_gradebook(classroom, tmp_path: Path):
    (classroom / "carol.py").unlink()  # the hang is graded in the test above
    (classroom / "frank.py").write_text(GOOD.replace("1 - output", "1 + output"))
    whole = run_cli("grade", "sigmoid", str(classroom), "--json", "--feedback", "summary")
    assert whole.exit_code == 0, whole.stderr
    shards = []
    for k in (1, 2, 3):
        part = run_cli(
            "grade", "sigmoid", str(classroom), "--json", "--feedback", "summary",
            "--shard", f"{k}/3",
        )  # fmt: skip
        assert part.exit_code == 0, part.stderr
        assert len(part.json()["grades"]) < len(whole.json()["grades"])
        shards.append(tmp_path / f"shard-{k}.json")
        shards[-1].write_text(part.stdout)
    csv_path = tmp_path / "merged.csv"
    merged = run_cli("grade-merge", *map(str, reversed(shards)), "--json", "--csv", str(csv_path))
    assert merged.exit_code == 0, merged.stderr
    assert _without_times(merged.json()) == _without_times(whole.json())
    rows = list(csv.DictReader(csv_path.read_text().splitlines()))
    assert [r["submission"] for r in rows] == [g["submission"] for g in whole.json()["grades"]]

    table = run_cli("grade-merge", *map(str, shards))
    assert table.exit_code == 0 and "passed." in table.stdout


@pytest.mark.usefixtures("warm_commands")
def test_merge_refuses_a_missing_a_repeated_or_a_foreign_shard(classroom, tmp_path: Path):
    files = [str(classroom / "alice.py"), str(classroom / "erin.py")]
    for name, exercise, shard in (("one", "sigmoid", "1/2"), ("two", "sigmoid", "2/2"),
                                  ("other", "tanh", "2/2")):  # fmt: skip
        result = run_cli("grade", exercise, *files, "--json", "--shard", shard)
        (tmp_path / f"{name}.json").write_text(result.stdout)
    (tmp_path / "junk.json").write_text("{}")
    broken = json.loads((tmp_path / "two.json").read_text())
    del broken["grades"][0]["stages"][0]["verdict"]
    (tmp_path / "broken.json").write_text(json.dumps(broken))
    for given, problem in (
        (["one"], "shard 2/2 is missing"),
        (["one", "one"], "are both shard 1/2"),
        (["one", "other"], "their exercise differs (tanh and sigmoid)"),
        (["junk"], "not a gradebook of this trainer"),
        (["one", "broken"], "broken.json: a field is missing or of the wrong type"),
    ):
        result = run_cli("grade-merge", *(str(tmp_path / f"{g}.json") for g in given))
        assert result.exit_code == 2, given
        assert problem in result.stderr, (given, result.stderr)


# Formats --------------------------------------------------------------------------


@pytest.mark.usefixtures("warm_commands")
def test_the_csv_has_a_row_per_submission_with_score_stages_time_and_sha256(
    classroom, tmp_path: Path
):
    path = tmp_path / "grades.csv"
    files = [classroom / "alice.py", classroom / "bob.py", classroom / "erin.py"]
    result = run_cli("grade", "sigmoid", *map(str, files), "--csv", str(path))
    assert result.exit_code == 0, result.stderr
    rows = {Path(r["submission"]).name: r for r in csv.DictReader(path.read_text().splitlines())}
    assert set(rows) == {"alice.py", "bob.py", "erin.py"}
    stages = list(CATALOG.get("sigmoid").stage_weights())
    for file in files:
        row = rows[file.name]
        assert row["sha256"] == hashlib.sha256(file.read_bytes()).hexdigest()
        assert float(row["seconds"]) > 0
        assert all(row[s] in ("pass", "fail", "skip") for s in stages)
    assert rows["alice.py"]["score"] == rows["alice.py"]["max_score"]
    assert rows["bob.py"]["backward"] == "fail" and rows["bob.py"]["first_failure"] == "backward"
    assert 0 < int(rows["bob.py"]["score"]) < int(rows["bob.py"]["max_score"])
    assert rows["erin.py"]["score"] == "0" and rows["erin.py"]["load"] == "fail"


@pytest.mark.usefixtures("warm_commands")
def test_junit_has_a_test_case_per_stage_with_the_score_as_a_property(classroom, tmp_path: Path):
    path = tmp_path / "grades.xml"
    result = run_cli("grade", "sigmoid", str(classroom / "bob.py"), "--junit", str(path))
    assert result.exit_code == 0, result.stderr
    (suite,) = ElementTree.parse(path).getroot()
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    titles = [STAGE_BY_ID[s].title for s in CATALOG.get("sigmoid").stage_weights()]
    assert list(cases) == titles
    assert cases["Backward parity"].find("failure") is not None
    assert cases["Forward parity"].find("failure") is None
    assert cases["CUDA"].find("skipped") is not None
    properties = {p.get("name"): p.get("value", "") for p in suite.iter("property")}
    assert int(properties["score"]) < int(properties["max_score"])
    assert suite.get("failures") == str(len(suite.findall("testcase/failure")))


@pytest.mark.usefixtures("warm_commands")
def test_an_output_path_in_a_missing_folder_stops_before_any_grading(classroom, tmp_path: Path):
    result = run_cli(
        "grade", "sigmoid", str(classroom / "alice.py"), "--csv", str(tmp_path / "no" / "g.csv")
    )
    assert result.exit_code == 2
    assert "no folder" in result.stderr and "Host protection" not in result.stdout


# Flags ----------------------------------------------------------------------------


@pytest.mark.usefixtures("warm_commands")
def test_every_format_flags_a_symlink_a_file_outside_a_copy_of_the_reference_and_of_another(
    tmp_path: Path,
):
    folder = tmp_path / "class"
    (folder / "team").mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "eve.py").write_text(GOOD)
    (folder / "alice.py").write_text("# all my own work\n" + GOOD.replace("    ", "  "))
    (folder / "bob.py").write_text(WRONG)
    (folder / "carol.py").write_text(WRONG.replace("\n\n", "\n\n# hmm\n\n") + "\n\n")
    (folder / "dave.py").symlink_to(REPO / "solutions" / "sigmoid.py")
    (folder / "team" / "out").symlink_to(elsewhere, target_is_directory=True)
    (folder / "frank.py").write_text(scratch_text(CATALOG.get("sigmoid")))
    (folder / "gina.py").write_text(scratch_text(CATALOG.get("sigmoid")))
    csv_path, junit_path = tmp_path / "g.csv", tmp_path / "g.xml"
    result = run_cli(
        "grade", "sigmoid", str(folder), "--json", "--csv", str(csv_path), "--junit", str(junit_path)
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    by_name = {Path(g["submission"]).name: g for g in document["grades"]}
    flags = {name: [(f["kind"], f["matched"]) for f in g["flags"]] for name, g in by_name.items()}
    assert flags == {
        "alice.py": [("reference", "")],
        "bob.py": [("duplicate", str(folder / "carol.py"))],
        "carol.py": [("duplicate", str(folder / "bob.py"))],
        "dave.py": [("symlink", str(REPO / "solutions" / "sigmoid.py"))],
        "eve.py": [("outside", str(elsewhere / "eve.py"))],
        "frank.py": [],  # two untouched stubs are no copy
        "gina.py": [],
    }
    for name in ("dave.py", "eve.py"):  # never run: no report, nothing of what they point at
        grade = by_name[name]
        assert (grade["verdict"], grade["score"], grade["report"]) == ("error", 0, {})
    assert by_name["alice.py"]["score"] == by_name["alice.py"]["max_score"]  # flagged, not docked

    rows = {
        Path(r["submission"]).name: r for r in csv.DictReader(csv_path.read_text().splitlines())
    }
    assert rows["dave.py"]["flags"].startswith(f"a symlink to {REPO / 'solutions'}")
    assert (
        rows["bob.py"]["flags"]
        == f"identical to {folder / 'carol.py'} (whitespace and comments aside)"
    )
    assert rows["alice.py"]["flags"].startswith("identical to the reference solution")
    assert rows["eve.py"]["flags"].startswith(f"outside the class folder (it is {elsewhere}")
    assert rows["frank.py"]["flags"] == ""

    suites = {Path(s.get("name", "")).name: s for s in ElementTree.parse(junit_path).getroot()}
    properties = {
        name: {p.get("name"): p.get("value") for p in suite.iter("property")}
        for name, suite in suites.items()
    }
    assert "flag.symlink" in properties["dave.py"] and "flag.outside" in properties["eve.py"]
    assert "flag.reference" in properties["alice.py"] and "flag.duplicate" in properties["carol.py"]
    assert not [p for p in properties["frank.py"] if p and p.startswith("flag.")]

    book = tmp_path / "book.json"
    book.write_text(result.stdout)
    table = " ".join(run_cli("grade-merge", str(book)).stdout.split())
    assert "dave.py ⚑" in table and "frank.py ⚑" not in table
    assert f"dave.py: a symlink to {REPO / 'solutions' / 'sigmoid.py'}: not run, 0 points" in table
    assert "alice.py: identical to the reference solution" in table
    assert f"out/eve.py: outside the class folder (it is {elsewhere / 'eve.py'})" in table
