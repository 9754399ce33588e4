"""GitHub Classroom: the files that grade a class's repositories, and each check's result.

``trainer classroom init`` writes three files into a template repository:

* ``.github/classroom/autograd_trainer-VERSION-py3-none-any.whl``, the running
  trainer's wheel (:mod:`trainer.wheel`): the package is on no index, so the
  workflow installs this file (``--install`` names something else instead);

* ``.github/workflows/classroom.yml``, the workflow Classroom's current autograding
  runs. It is named ``Autograding Tests``, as Classroom expects; each exercise is a
  step (its id is the exercise's) that runs ``trainer check EX --json`` and turns the
  report into the step's ``result`` output with ``trainer classroom result``; the last
  step hands every result to Classroom's reporter action, which adds up the points.
* ``.github/classroom/autograding.json``, the same tests in the older autograder's
  format. That format scores a test all or nothing, so an exercise is worth its
  points only when every stage passes.

A result is what the reporter reads from ``<STEP ID>_RESULTS``: base64 of a JSON
document with a status, a maximum and one test per stage. Its points are exactly
``trainer grade``'s (:func:`trainer.gradebook.stage_grades`): a submission scores the
weights of the stages it passed; a stage skipped where a skip still passes (CUDA on a
runner without a GPU) is left out of the maximum, and out of the tests; a stage that
did not run scores 0 and stays in the maximum. A check that could not run at all
(no scratch file, no report) is an ``error`` worth 0, never a pass; so is one that a
bug of the checker's stopped, in the bug's own words (not the student's mistake).

No torch here: ``trainer classroom result`` runs in the workflow after the check, and
reads its JSON.
"""

from __future__ import annotations

import base64
import json
import shlex
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from trainer.bugs import bug_message
from trainer.catalog import catalog_root
from trainer.checking.report import CheckerBug, CheckReport, StageResult, Verdict
from trainer.errors import TrainerError
from trainer.files import write_atomically
from trainer.flags import Flag, not_run, placement_flags
from trainer.gradebook import StageGrade, stage_grades
from trainer.spec import Exercise
from trainer.vocabulary import STAGE_BY_ID

WORKFLOW_FILE = PurePosixPath(".github/workflows/classroom.yml")
AUTOGRADING_FILE = PurePosixPath(".github/classroom/autograding.json")
# Classroom's reporter finds the run by this name.
WORKFLOW_NAME = "Autograding Tests"
REPORTER = "classroom-resources/autograding-grading-reporter@v1"
PYTHON_VERSION = "3.11"
# A CPU build, as the Makefile installs: pip would otherwise resolve the package's
# torch>=2.1 to a multi-GB CUDA build. The workflow falls back to the default index
# where PyTorch's is out of reach (a mirror), as the Makefile does.
TORCH_SPEC = "torch==2.13.0"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
TORCH_INSTALL = f"pip install {TORCH_SPEC} --index-url {CPU_INDEX}"
TORCH_STEP = (
    f"if python -c \"import urllib.request; urllib.request.urlopen('{CPU_INDEX}/', timeout=10)\""
    " 2>/dev/null; then\n"
    f"  {TORCH_INSTALL}\n"
    "else\n"
    f"  pip install {TORCH_SPEC}  # PyTorch's index is out of reach: the default index\n"
    "fi\n"
)
# The trainer is not on a package index: the repository carries its wheel (trainer wheel).
WHEEL_FOLDER = PurePosixPath(".github/classroom")
# Where the workflow keeps each check's report (in the runner's checkout, never committed).
RESULTS_DIR = ".trainer-results"
# The older autograder runs its tests in a plain shell: the trainer goes into a venv there.
OLD_VENV = ".trainer-venv"
STEP_MINUTES = 10  # per exercise: a check stops itself long before (trainer check --timeout)
SETUP_MINUTES = 20  # the older format counts the set-up (installing torch) in the first test
RESULT_VERSION = 1
# The reporter gets every result in one environment variable, which Linux caps at 128 KiB.
MAX_MESSAGE = 1000


@dataclass(frozen=True)
class ClassroomExercise:
    """An exercise as the workflow runs it: with the folder its spec comes from, as the
    repository holds it (``None``: a bundled exercise, which needs no folder)."""

    exercise: Exercise
    exercises_dir: str | None = None

    @property
    def id(self) -> str:
        return self.exercise.id

    def options(self) -> str:
        """The options every trainer command of this exercise takes in the workflow."""
        if self.exercises_dir is None:
            return ""
        return f" --exercises-dir {shlex.quote(self.exercises_dir)}"

    @property
    def report_path(self) -> str:
        return f"{RESULTS_DIR}/{self.id}.json"

    def check_command(self) -> str:
        return f"trainer check {self.id}{self.options()} --json"

    def result_command(self) -> str:
        return f"trainer classroom result {self.id} {self.report_path}{self.options()}"

    def step_script(self) -> str:
        """The exercise step's shell script: check (a failing check is a verdict, not a
        failed step), then write the step's ``result`` output."""
        return (
            f"mkdir -p {RESULTS_DIR}\n"
            f"{self.check_command()} > {self.report_path} || true\n"
            f'{self.result_command()} >> "$GITHUB_OUTPUT"\n'
        )


def in_repository(exercise: Exercise, repository: Path) -> ClassroomExercise:
    """The exercise with the folder it comes from, relative to the repository.

    A folder outside the repository is an error: the workflow runs in a checkout of
    the repository, where that folder does not exist.
    """
    root = exercise.source.resolve().parent.parent
    if root == catalog_root().resolve():
        return ClassroomExercise(exercise)
    try:
        relative = root.relative_to(repository.resolve())
    except ValueError:
        raise TrainerError(
            f"the exercise `{exercise.id}` comes from {root}, outside {repository}: the "
            "workflow runs in the repository, where that folder does not exist. Copy the "
            f"folder into {repository} and give the copy to --exercises-dir."
        ) from None
    return ClassroomExercise(exercise, relative.as_posix() or ".")


def max_points(exercise: Exercise) -> int:
    """What a passing submission scores on a runner without a GPU (as GitHub's are):
    the points of ``trainer grade`` for a report where every stage passed, but those
    whose skip still passes, which were skipped."""
    passing = CheckReport(
        exercise=exercise.id,
        file="",
        file_sha256="",
        seed=0,
        stages=[
            StageResult(
                stage_id,
                Verdict.SKIP if STAGE_BY_ID[stage_id].may_skip_in_a_pass else Verdict.PASS,
                "",
            )
            for stage_id in exercise.stage_weights()
        ],
    )
    return sum(stage.points for stage in stage_grades(exercise, passing) if stage.counted)


# The workflow and the older autograding.json


class _Dumper(yaml.SafeDumper):
    """YAML for people: scripts as literal blocks, keys in the order written."""


def _represent_text(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    style = "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_Dumper.add_representer(str, _represent_text)


def wheel_install(wheel: str) -> str:
    """What ``pip install`` gets for the wheel the repository carries."""
    return f"{WHEEL_FOLDER}/{wheel}"


def workflow(exercises: Sequence[ClassroomExercise], install: str) -> str:
    """``.github/workflows/classroom.yml``: one step per exercise, then the reporter."""
    steps: list[dict[str, Any]] = [
        {"name": "Check out the submission", "uses": "actions/checkout@v4"},
        {
            "name": "Set up Python",
            "uses": "actions/setup-python@v5",
            "with": {"python-version": PYTHON_VERSION},
        },
        {"name": "Install a CPU build of torch", "run": TORCH_STEP},
        {"name": "Install the trainer", "run": f"pip install {install}\n"},
    ]
    for item in exercises:
        steps.append(
            {
                "name": f"{item.id}: {item.exercise.title}",
                "id": item.id,
                "timeout-minutes": STEP_MINUTES,
                "run": item.step_script(),
            }
        )
    steps.append(
        {
            "name": "Autograding Reporter",
            "uses": REPORTER,
            "env": {
                results_variable(item.id): f"${{{{ steps.{item.id}.outputs.result }}}}"
                for item in exercises
            },
            "with": {"runners": ",".join(item.id for item in exercises)},
        }
    )
    document = {
        "name": WORKFLOW_NAME,
        "on": ["push", "repository_dispatch"],
        "permissions": {"checks": "write", "actions": "read", "contents": "read"},
        "jobs": {
            "run-autograding-tests": {
                "runs-on": "ubuntu-latest",
                "if": "github.actor != 'github-classroom[bot]'",
                "steps": steps,
            }
        },
    }
    header = (
        "# Written by `trainer classroom init`: each exercise's step checks it with\n"
        "# `trainer check EX --json` and scores its stages by their weights.\n"
    )
    text: str = yaml.dump(document, Dumper=_Dumper, sort_keys=False, width=1000, allow_unicode=True)
    return header + text


def results_variable(step_id: str) -> str:
    """The variable the reporter reads a step's result from."""
    return f"{step_id.upper()}_RESULTS"


def autograding_json(exercises: Sequence[ClassroomExercise], install: str) -> str:
    """``.github/classroom/autograding.json``, the older autograder's tests: one per
    exercise, all its points or none. The first test installs the trainer in a venv."""
    venv = f"{OLD_VENV}/bin"
    setup = " && ".join(
        [f"python3 -m venv {OLD_VENV}", f"{venv}/{TORCH_INSTALL}", f"{venv}/pip install {install}"]
    )
    tests = [
        {
            "name": f"{item.id}: {item.exercise.title}",
            "setup": setup if number == 0 else "",
            "run": f"{venv}/trainer check {item.id}{item.options()}",
            "input": "",
            "output": "",
            "comparison": "included",
            "timeout": SETUP_MINUTES if number == 0 else STEP_MINUTES,
            "points": max_points(item.exercise),
        }
        for number, item in enumerate(exercises)
    ]
    return json.dumps({"tests": tests}, indent=2, ensure_ascii=False) + "\n"


def classroom_files(
    exercises: Sequence[ClassroomExercise], install: str
) -> dict[PurePosixPath, str]:
    """What ``init`` writes, by path in the repository."""
    return {
        WORKFLOW_FILE: workflow(exercises, install),
        AUTOGRADING_FILE: autograding_json(exercises, install),
    }


def write_files(
    folder: Path,
    files: dict[PurePosixPath, str],
    force: bool = False,
    also: Sequence[PurePosixPath] = (),
) -> list[Path]:
    """Write ``files`` under ``folder``; an existing file only with ``force``, and
    nothing at all when one exists without it (nor one of ``also``, which the caller
    writes next)."""
    if not folder.is_dir():
        raise TrainerError(f"no folder {folder}. Give --dir the repository's folder.")
    paths = [folder / relative for relative in files]
    existing = [path for path in [*paths, *(folder / p for p in also)] if path.exists()]
    if existing and not force:
        names = " and ".join(str(path) for path in existing)
        it, exists = ("it", "exists") if len(existing) == 1 else ("them", "exist")
        raise TrainerError(f"{names} {exists} already. Give --force to replace {it}.")
    for path, text in zip(paths, files.values(), strict=True):
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(path, text)
        except OSError as error:
            raise TrainerError(f"cannot write {path}: {error.strerror}.") from None
    return paths


# A check's report, as the reporter reads it


class NoReport(Exception):
    """The check left no report that can be read; the message says why."""


def read_report(path: Path, exercise_id: str) -> CheckReport:
    """The report ``trainer check EX --json`` wrote to ``path``; :class:`NoReport` when
    there is none: a missing, empty or malformed file, or another exercise's report."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise NoReport(f"there is no report at {path}") from None
    except (OSError, UnicodeDecodeError) as error:
        raise NoReport(f"{path} cannot be read ({error})") from None
    if not text.strip():
        raise NoReport(f"trainer check wrote no report to {path}")
    not_a_report = f"{path} is not a report of `trainer check {exercise_id} --json`"
    try:
        data = json.loads(text)
    except ValueError:
        raise NoReport(f"{not_a_report} (not JSON)") from None
    if not isinstance(data, dict):
        raise NoReport(f"{not_a_report} (not a JSON object)")
    if data.get("exercise") != exercise_id:
        raise NoReport(f"{not_a_report}: it is the report of {data.get('exercise')!r}")
    stages = data.get("stages")
    if not isinstance(stages, list) or not stages or not all(isinstance(s, dict) for s in stages):
        raise NoReport(f"{not_a_report} (it lists no stages)")
    try:
        return CheckReport(
            exercise=exercise_id,
            file=str(data.get("file", "")),
            file_sha256=str(data.get("file_sha256", "")),
            seed=int(data.get("seed", 0)),
            stages=[StageResult.from_dict(stage) for stage in stages],
            seconds=float(data.get("seconds", 0.0) or 0.0),
            bug=CheckerBug.from_dict(data.get("bug")),
        )
    except (TypeError, ValueError) as error:
        raise NoReport(f"{not_a_report} ({error})") from None


def scratch_flags(scratch: Path, repository: Path) -> list[Flag]:
    """The student's file is a symlink, or lies outside the repository: it scores 0."""
    if not scratch.is_symlink() and not scratch.exists():
        return []
    return placement_flags(scratch, repository)


def classroom_result(
    exercise: Exercise, report: CheckReport | None, problem: str = "", flags: Sequence[Flag] = ()
) -> dict[str, Any]:
    """The reporter's document for one exercise: one test per stage in the maximum,
    worth the stage's points. Without a report (``problem`` says why), or for a file
    that is a symlink or outside the repository (its ``flags``), every stage fails
    with 0 points and the status is ``error``."""
    refusal = not_run(flags)
    bug = report.bug if report is not None else None
    if report is None or refusal or bug is not None:
        why = "; ".join(flag.words() for flag in flags) if refusal else problem
        what = "not graded" if refusal else "the check could not run"
        if bug is not None and not refusal:
            what, why = "the check did not finish", bug_message(bug.where, bug.path, bug.error)
        grades = stage_grades(exercise, None)
        tests = [
            _test(exercise, grade, "error", f"{exercise.id}: {what}: {why}") for grade in grades
        ]
        document = _result("error", sum(grade.weight for grade in grades), tests)
        if flags:
            document["flags"] = [asdict(flag) for flag in flags]
        return document
    grades = [grade for grade in stage_grades(exercise, report) if grade.counted]
    seconds = {stage.id: stage.seconds for stage in report.stages}
    tests = [
        _test(
            exercise,
            grade,
            "pass" if grade.verdict == Verdict.PASS.value else "fail",
            grade.message,
            seconds.get(grade.id, 0.0),
        )
        for grade in grades
    ]
    passed = report.passed and all(test["status"] == "pass" for test in tests)
    return _result("pass" if passed else "fail", sum(grade.weight for grade in grades), tests)


def _test(
    exercise: Exercise, grade: StageGrade, status: str, message: str, seconds: float = 0.0
) -> dict[str, Any]:
    return {
        "name": f"{exercise.id}: {grade.title}",
        "status": status,
        "score": grade.points if status == "pass" else 0,
        "message": message if len(message) <= MAX_MESSAGE else message[: MAX_MESSAGE - 1] + "…",
        "line_no": 0,
        "execution_time": f"{seconds:.1f}s",
    }


def _result(status: str, max_score: int, tests: list[dict[str, Any]]) -> dict[str, Any]:
    return {"version": RESULT_VERSION, "status": status, "max_score": max_score, "tests": tests}


def output_line(result: dict[str, Any]) -> str:
    """The step's output, a line for ``$GITHUB_OUTPUT``: ``result=`` and base64 of the JSON."""
    text = json.dumps(result, ensure_ascii=False, separators=(",", ":"))
    encoded = base64.b64encode(text.encode("utf-8"))
    return f"result={encoded.decode('ascii')}"


def decode_output(line: str) -> dict[str, Any]:
    """A result back from its output line (what the reporter does; for tests and people)."""
    name, _, value = line.strip().partition("=")
    if name != "result":
        raise ValueError(f"not a result line: {line!r}")
    decoded: dict[str, Any] = json.loads(base64.b64decode(value, validate=True))
    return decoded
