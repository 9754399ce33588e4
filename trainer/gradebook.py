"""A class's grades as data: scores from stage weights, and the gradebook's formats.

A submission's score is the sum of the weights of the stages it passed (the
defaults are in :data:`trainer.vocabulary.STAGES`; a spec's ``weights`` may
change them). Its maximum counts every stage the exercise has, except a stage
skipped where a skip still passes (CUDA on a machine without a GPU): a stage
that did not run because the file failed earlier scores 0.

Each grade carries its flags (:mod:`trainer.flags`: a symlink, a file outside
the class folder, a copy of the reference or of another submission), in every
format. A :class:`Gradebook` is what ``trainer grade --json`` prints; shards of one
class (``--shard K/N``) are combined by :func:`merge`, exactly: the result is
the gradebook one unsharded run gives. The CSV and JUnit forms are derived
from it, so that every format says the same.
"""

from __future__ import annotations

import csv
import io
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from trainer.bugs import bug_message
from trainer.checking.report import CheckReport, Verdict
from trainer.errors import TrainerError
from trainer.flags import Flag
from trainer.spec import Exercise
from trainer.vocabulary import STAGE_BY_ID

GRADEBOOK_VERSION = 1


@dataclass
class StageGrade:
    id: str
    title: str
    verdict: str  # pass, fail or skip
    weight: int
    points: int
    counted: bool  # False: skipped where a skip still passes; not in the maximum
    message: str = ""  # at the gradebook's feedback level


@dataclass
class Grade:
    submission: str
    index: int  # its place among all the class's submissions (orders a merged gradebook)
    # "pass", "fail", "error" (the check itself could not run) or "bug" (a bug of the
    # checker's stopped it: not the student's doing; grade it again once fixed)
    verdict: str
    score: int
    max_score: int
    sha256: str = ""
    stage: str = ""  # the first failing stage
    message: str = ""  # at the gradebook's feedback level
    seconds: float = 0.0
    stages: list[StageGrade] = field(default_factory=list)
    report: dict[str, Any] = field(default_factory=dict)  # the check's report, at that level
    flags: list[Flag] = field(default_factory=list)  # what a grader must look at (trainer.flags)


def stage_grades(exercise: Exercise, report: CheckReport | None) -> list[StageGrade]:
    """Each stage of ``exercise`` with its verdict in ``report`` and the points it earns;
    a stage the report lacks (the check stopped before it) failed."""
    results = {stage.id: stage for stage in report.stages} if report is not None else {}
    graded = []
    for stage_id, weight in exercise.stage_weights().items():
        result = results.get(stage_id)
        verdict = result.verdict if result is not None else Verdict.FAIL
        counted = not (verdict is Verdict.SKIP and STAGE_BY_ID[stage_id].may_skip_in_a_pass)
        graded.append(
            StageGrade(
                id=stage_id,
                title=STAGE_BY_ID[stage_id].title,
                verdict=verdict.value,
                weight=weight,
                points=weight if verdict is Verdict.PASS else 0,
                counted=counted,
                message=result.message if result is not None else "did not run",
            )
        )
    return graded


def grade_of(exercise: Exercise, submission: str, index: int, report: CheckReport) -> Grade:
    """A checked submission's grade. One that a bug of ours stopped is a ``bug``: the
    points of the stages that finished, and the bug's words instead of a failure."""
    stages = stage_grades(exercise, report)
    failure = report.first_failure if report.bug is None else None
    verdict = "bug" if report.bug is not None else "pass" if report.passed else "fail"
    message = failure.message if failure else ""
    if report.bug is not None:
        message = bug_message(report.bug.where, report.bug.path, report.bug.error)
    return Grade(
        submission=submission,
        index=index,
        verdict=verdict,
        score=sum(s.points for s in stages),
        max_score=sum(s.weight for s in stages if s.counted),
        sha256=report.file_sha256,
        stage=failure.id if failure else "",
        message=message,
        seconds=report.seconds,
        stages=stages,
        report=report.to_dict(),
    )


def error_grade(
    exercise: Exercise,
    submission: str,
    index: int,
    message: str,
    sha256: str = "",
    flags: Sequence[Flag] = (),
) -> Grade:
    """A submission whose check could not run (unreadable file) or that was not run (a
    symlink, a file outside the class folder: its ``flags`` say): 0 points, every stage
    failed."""
    stages = stage_grades(exercise, None)
    return Grade(
        submission=submission,
        index=index,
        verdict="error",
        score=0,
        max_score=sum(s.weight for s in stages),
        sha256=sha256,
        message=message,
        stages=[StageGrade(**{**asdict(s), "message": ""}) for s in stages],
        flags=list(flags),
    )


@dataclass
class Gradebook:
    exercise: str
    feedback: str
    protection: dict[str, Any] | None
    total: int  # submissions in the whole class, over every shard
    grades: list[Grade]
    shard: tuple[int, int] = (1, 1)  # this gradebook's share: K of N

    @property
    def stage_ids(self) -> list[str]:
        """The stage columns, in the order of the exercise's stages."""
        seen: dict[str, None] = {}
        for grade in self.grades:
            seen.update((s.id, None) for s in grade.stages)
        return list(seen)

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": GRADEBOOK_VERSION,
            "exercise": self.exercise,
            "feedback": self.feedback,
            "protection": self.protection,
            "shard": {"index": self.shard[0], "count": self.shard[1]},
            "total": self.total,
            "passed": sum(g.verdict == "pass" for g in self.grades),
            "grades": [asdict(g) for g in self.grades],
        }

    @classmethod
    def from_dict(cls, data: object, source: str) -> Gradebook:
        """Read a gradebook back (``grade --json``'s output); anything malformed is an
        error naming ``source`` and what is wrong."""
        try:
            if not isinstance(data, dict) or data.get("version") != GRADEBOOK_VERSION:
                raise ValueError(
                    f"not a gradebook of this trainer (version {GRADEBOOK_VERSION}); "
                    "give the output of `trainer grade --json`"
                )
            shard = data["shard"]
            grades = [
                Grade(
                    **{
                        **g,
                        "stages": [StageGrade(**s) for s in g["stages"]],
                        "flags": [Flag(**f) for f in g.get("flags", [])],
                    }
                )
                for g in data["grades"]
            ]
            book = cls(
                exercise=str(data["exercise"]),
                feedback=str(data["feedback"]),
                protection=data["protection"],
                total=int(data["total"]),
                grades=grades,
                shard=(int(shard["index"]), int(shard["count"])),
            )
        except ValueError as error:
            raise TrainerError(f"{source}: {error}.") from None
        except (KeyError, TypeError, AttributeError) as error:
            raise TrainerError(
                f"{source}: a field is missing or of the wrong type ({error}); give the "
                "output of `trainer grade --json` as it was written."
            ) from None
        return book


def merge(books: Sequence[tuple[str, Gradebook]]) -> Gradebook:
    """One gradebook from the shards of one class (``(source, gradebook)`` pairs):
    every shard present once, every submission once, in the class's order."""
    if not books:
        raise TrainerError("no gradebooks to merge: give the JSON of each shard.")
    first_source, first = books[0]
    count = first.shard[1]
    seen: dict[int, str] = {}
    for source, book in books:
        for what, mine, theirs in (
            ("exercise", book.exercise, first.exercise),
            ("feedback level", book.feedback, first.feedback),
            ("number of shards", book.shard[1], count),
            ("number of submissions", book.total, first.total),
        ):
            if mine != theirs:
                raise TrainerError(
                    f"{source} and {first_source} are not shards of one grading: "
                    f"their {what} differs ({mine} and {theirs})."
                )
        if book.shard[0] in seen:
            raise TrainerError(
                f"{source} and {seen[book.shard[0]]} are both shard {book.shard[0]}/{count}."
            )
        seen[book.shard[0]] = source
    missing = [f"{k}/{count}" for k in range(1, count + 1) if k not in seen]
    if missing:
        raise TrainerError(f"shard {', '.join(missing)} is missing: give every shard's JSON.")
    grades = sorted((g for _, b in books for g in b.grades), key=lambda g: g.index)
    if [g.index for g in grades] != list(range(first.total)):
        raise TrainerError(
            "the shards do not cover each submission exactly once: were they graded "
            "from the same list of submissions?"
        )
    return Gradebook(
        exercise=first.exercise,
        feedback=first.feedback,
        protection=_least_protected(b.protection for _, b in books),
        total=first.total,
        grades=grades,
    )


def _least_protected(levels: Iterable[dict[str, Any] | None]) -> dict[str, Any] | None:
    """The level of the least protected shard (unknown counts as least)."""
    ranked = sorted(levels, key=lambda p: -1 if p is None else -len(p.get("missing", {})))
    return ranked[0] if ranked else None


CSV_FIXED = (
    "submission",
    "sha256",
    "verdict",
    "score",
    "max_score",
    "seconds",
    "first_failure",
    "flags",
)


def flag_text(grade: Grade) -> str:
    """Its flags in words, one sentence each: the CSV's column, the table's notes."""
    return "; ".join(flag.words() for flag in grade.flags)


def gradebook_csv(book: Gradebook) -> str:
    """One row per submission: score, verdict, time, sha256, flags, each stage's verdict,
    message."""
    stage_ids = book.stage_ids
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([*CSV_FIXED, *stage_ids, "message"])
    for grade in book.grades:
        verdicts = {s.id: s.verdict for s in grade.stages}
        writer.writerow(
            [
                grade.submission,
                grade.sha256,
                grade.verdict,
                grade.score,
                grade.max_score,
                f"{grade.seconds:.3f}",
                grade.stage,
                flag_text(grade),
                *(verdicts.get(stage, "") for stage in stage_ids),
                grade.message,
            ]
        )
    return buffer.getvalue()


def gradebook_junit(book: Gradebook) -> str:
    """JUnit XML: one test suite per submission, one test case per stage, so that a
    CI shows which stage failed; the score and sha256 are the suite's properties."""
    root = ElementTree.Element("testsuites", name=f"trainer.{book.exercise}")
    for grade in book.grades:
        failures = sum(s.verdict == "fail" for s in grade.stages)
        skipped = sum(s.verdict == "skip" for s in grade.stages)
        suite = ElementTree.SubElement(
            root,
            "testsuite",
            name=grade.submission,
            tests=str(len(grade.stages)),
            failures=str(failures if grade.verdict not in ("error", "bug") else 0),
            errors=str(len(grade.stages) if grade.verdict in ("error", "bug") else 0),
            skipped=str(skipped),
            time=f"{grade.seconds:.3f}",
        )
        properties = ElementTree.SubElement(suite, "properties")
        for name, value in (
            ("score", grade.score),
            ("max_score", grade.max_score),
            ("sha256", grade.sha256),
            ("feedback", book.feedback),
        ):
            ElementTree.SubElement(properties, "property", name=name, value=str(value))
        for flag in grade.flags:
            ElementTree.SubElement(
                properties, "property", name=f"flag.{flag.kind}", value=flag.words()
            )
        for stage in grade.stages:
            case = ElementTree.SubElement(
                suite,
                "testcase",
                classname=f"{book.exercise}.{grade.submission}",
                name=stage.title,
                time=f"{_stage_seconds(grade, stage.id):.3f}",
            )
            if grade.verdict in ("error", "bug"):
                ElementTree.SubElement(case, "error", message=grade.message)
            elif stage.verdict == "fail":
                failure = ElementTree.SubElement(case, "failure", message=stage.message)
                failure.text = f"{stage.id}: 0 of {stage.weight} points"
            elif stage.verdict == "skip":
                ElementTree.SubElement(case, "skipped", message=stage.message)
    ElementTree.indent(root)
    return ElementTree.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def _stage_seconds(grade: Grade, stage_id: str) -> float:
    for stage in grade.report.get("stages", []):
        if isinstance(stage, dict) and stage.get("id") == stage_id:
            return float(stage.get("seconds", 0.0) or 0.0)
    return 0.0
