"""Grade a class: check many submissions of one exercise in parallel, isolated as `check` does."""

from __future__ import annotations

import os
import tempfile
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainer.catalog import solution_path
from trainer.checking.report import ProtectionLevel
from trainer.checking.runner import DEFAULT_TIMEOUT, CheckingService, run_check
from trainer.errors import TrainerError
from trainer.spec import Exercise


@dataclass
class Grade:
    submission: str
    verdict: str  # "pass", "fail", or "error" (the check itself could not run)
    stage: str = ""  # the first failing stage
    message: str = ""
    seconds: float = 0.0
    report: dict[str, Any] = field(default_factory=dict)


def collect_submissions(paths: Sequence[Path]) -> list[Path]:
    """Files as given, and the .py files inside folders (sorted); a missing path is an error."""
    found: list[Path] = []
    for path in paths:
        if path.is_file():
            found.append(path)
        elif path.is_dir():
            found += sorted(p for p in path.rglob("*.py") if p.is_file())
        else:
            raise TrainerError(f"no file or folder at {path}. Check the paths given to grade.")
    if not found:
        raise TrainerError("no .py submissions found in the paths given. Check the paths.")
    return found


def _grade_one(
    exercise: Exercise, path: Path, timeout: float, warm: CheckingService | None
) -> Grade:
    try:
        report = run_check(
            exercise, path, timeout=timeout, solution=solution_path(exercise), service=warm
        )
    except TrainerError as error:
        return Grade(str(path), "error", message=error.message)
    except OSError as error:
        return Grade(str(path), "error", message=f"cannot be read: {error.strerror}")
    failure = report.first_failure
    return Grade(
        submission=str(path),
        verdict="pass" if report.passed else "fail",
        stage=failure.id if failure else "",
        message=failure.message if failure else "",
        seconds=report.seconds,
        report=report.to_dict(),
    )


UNPROTECTED = (
    "grade runs other people's code, and this machine cannot keep it from the rest of the "
    "machine: host protection is {summary}. Grade inside a container (see the README, "
    '"Host protection"), or pass --unprotected to grade here anyway.'
)


def protection_level(exercise: Exercise, service: CheckingService) -> ProtectionLevel | None:
    """The host protection a check gets on this machine: a learner process loads an empty file."""
    with tempfile.TemporaryDirectory(prefix="trainer-probe-") as folder:
        probe = Path(folder) / "probe.py"
        probe.write_text("# what protection does a check get here?\n", encoding="utf-8")
        return run_check(exercise, probe, service=service).protection


def grade(
    exercise: Exercise,
    submissions: Sequence[Path],
    jobs: int | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    on_done: Callable[[Grade], None] | None = None,
    unprotected: bool = False,
    on_protection: Callable[[ProtectionLevel | None], None] | None = None,
) -> list[Grade]:
    """Check every submission on every core; one hang or crash never stops the rest.

    First the host protection a check gets here is found (``on_protection`` hears it):
    anything less than full refuses to grade, unless ``unprotected``.
    """
    workers = jobs or os.cpu_count() or 1
    # torch is imported once, by a warm process; each submission is a fork of it.
    with CheckingService() as warm, ThreadPoolExecutor(max_workers=workers) as pool:
        level = protection_level(exercise, warm)
        if on_protection is not None:
            on_protection(level)
        if not unprotected and (level is None or level.missing):
            summary = level.summary() if level is not None else "unknown"
            raise TrainerError(UNPROTECTED.format(summary=summary))
        futures = [pool.submit(_grade_one, exercise, path, timeout, warm) for path in submissions]
        if on_done is not None:
            for future in futures:
                future.add_done_callback(lambda f: on_done(f.result()))
        return [f.result() for f in futures]


def junit_xml(exercise: Exercise, grades: Sequence[Grade]) -> str:
    """JUnit XML, one test case per submission, as CI systems read it."""
    failures = sum(g.verdict == "fail" for g in grades)
    errors = sum(g.verdict == "error" for g in grades)
    suite = ElementTree.Element(
        "testsuite",
        name=f"trainer.{exercise.id}",
        tests=str(len(grades)),
        failures=str(failures),
        errors=str(errors),
        time=f"{sum(g.seconds for g in grades):.3f}",
    )
    for item in grades:
        case = ElementTree.SubElement(
            suite,
            "testcase",
            classname=exercise.id,
            name=item.submission,
            time=f"{item.seconds:.3f}",
        )
        if item.verdict == "fail":
            failure = ElementTree.SubElement(
                case, "failure", message=f"{item.stage}: {item.message}"
            )
            failure.text = "\n".join(
                f"{s['id']}: {s['verdict']}: {s['message']}" for s in item.report.get("stages", [])
            )
        elif item.verdict == "error":
            ElementTree.SubElement(case, "error", message=item.message)
    root = ElementTree.Element("testsuites")
    root.append(suite)
    ElementTree.indent(root)
    return ElementTree.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
