"""What a check found: plain data shared by the child, the runner and the CLI.

No torch here: the parent process builds and renders reports without it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

from trainer.vocabulary import STAGE_BY_ID, STAGES

# Stages every check has; until the checker says which it runs, these are shown.
REQUIRED_STAGES = tuple(stage.id for stage in STAGES if stage.required)


# What host protection covers (issue 16), in the order reports list them, as said in words.
PROTECTIONS = {
    "network": "network isolation",
    "files": "file-system confinement",
    "scratch": "private scratch space",
    "processes": "one process, one thread",
    "cpu_time": "CPU-time cap",
    "memory": "memory cap",
}


@dataclass
class ProtectionLevel:
    """What the learner's process ran under: each protection applied (how), or missing (why).

    Decided in the learner's process before the learner's file runs
    (:mod:`trainer.checking.learner.confine`) and carried in the reply to ``load``.
    """

    applied: dict[str, str] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)

    @property
    def level(self) -> str:
        """``full``, ``partial`` or ``none``."""
        if not self.missing:
            return "full"
        return "partial" if self.applied else "none"

    def summary(self) -> str:
        """One line: the level, then what is missing and why."""
        if not self.missing:
            return "full: " + ", ".join(PROTECTIONS.get(n, n) for n in self.applied)
        missing = "; ".join(
            f"without {PROTECTIONS.get(name, name)} ({why})" for name, why in self.missing.items()
        )
        return f"{self.level}: {missing}"

    def to_dict(self) -> dict[str, Any]:
        return {"level": self.level, "applied": dict(self.applied), "missing": dict(self.missing)}

    @classmethod
    def from_dict(cls, data: object) -> ProtectionLevel | None:
        """Read a level back; anything malformed is unknown (None), never "full"."""
        if not isinstance(data, dict):
            return None
        applied, missing = data.get("applied"), data.get("missing")
        if not isinstance(applied, dict) or not isinstance(missing, dict):
            return None
        return cls(
            {str(k): str(v) for k, v in applied.items()},
            {str(k): str(v) for k, v in missing.items()},
        )


class Verdict(str, Enum):
    PASS = "pass"
    FAIL = "fail"
    SKIP = "skip"


@dataclass
class StageResult:
    id: str
    verdict: Verdict
    message: str
    details: list[str] = field(default_factory=list)
    seconds: float = 0.0
    # The classic mistake the failure looks like: mistake, input, text, view.
    diagnosis: dict[str, Any] | None = None
    # Pictures of a wrong gradient, as plain data (see trainer.checking.picture_data).
    pictures: list[dict[str, Any]] = field(default_factory=list)
    case: str = ""  # the run (case and dtype) the first failure happened in
    same_as: str = ""  # a failure an earlier stage (this id) gave first, in the same words
    # The first wrong gradient walking backward, where the spec's chain tells: a layer's
    # name or an input's (backward parity of a spec with ``intermediates:``)
    first_wrong: str = ""

    @property
    def title(self) -> str:
        stage = STAGE_BY_ID.get(self.id)
        return stage.title if stage is not None else self.id

    def to_dict(self) -> dict[str, Any]:
        """The one JSON form of a stage result: on the result pipe and in ``--json``."""
        return {**asdict(self), "title": self.title, "verdict": self.verdict.value}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StageResult:
        """Read a stage result back; a malformed one fails (never passes)."""
        diagnosis = data.get("diagnosis")
        details = data.get("details")
        try:
            verdict = Verdict(data.get("verdict"))
        except ValueError:
            verdict = Verdict.FAIL
        return cls(
            id=str(data.get("id")),
            verdict=verdict,
            message=str(data.get("message", "")),
            details=[str(d) for d in details] if isinstance(details, list) else [],
            seconds=float(data.get("seconds", 0.0) or 0.0),
            diagnosis=diagnosis if isinstance(diagnosis, dict) else None,
            case=str(data.get("case", "")),
            same_as=str(data.get("same_as", "")),
            first_wrong=str(data.get("first_wrong", "")),
            pictures=[p for p in data.get("pictures", []) if isinstance(p, dict)]
            if isinstance(data.get("pictures"), list)
            else [],
        )


def duration(seconds: float) -> str:
    """A wait as every view says it: two decimals under a second, one above."""
    return f"{seconds:.2f} s" if seconds < 1 else f"{seconds:.1f} s"


@dataclass(frozen=True)
class VerdictSentence:
    """A check's verdict in one sentence, without its full stop, built once here and
    said by every view (the console, the notebook, ``str()`` of the API's report).

    ``head`` is the part a view emphasises ("4 of 9 stages failed", "All 8 stages
    passed"), ``rest`` follows it (", first: Backward parity", " (1 skipped) in 2.1 s").
    """

    passed: bool
    head: str
    rest: str = ""

    def __str__(self) -> str:
        return self.head + self.rest


@dataclass
class CheckerBug:
    """A bug of ours that stopped a check (:mod:`trainer.bugs`): not a verdict on the file."""

    where: str  # "the stage Backward parity", "the checker", "the checking server", ...
    error: str  # the exception, ``Name: message``
    path: str = ""  # the file its traceback was written to ("" when it could not be)

    def to_dict(self) -> dict[str, str]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: object) -> CheckerBug | None:
        if not isinstance(data, dict):
            return None
        return cls(
            str(data.get("where", "")), str(data.get("error", "")), str(data.get("path", ""))
        )


@dataclass
class CheckReport:
    exercise: str
    file: str
    file_sha256: str
    seed: int
    stages: list[StageResult]
    seconds: float = 0.0
    # The tail of what the learner's code printed, shown when a stage fails.
    output: str = ""
    notes: list[str] = field(default_factory=list)  # advice that does not fail the check
    # What the learner's code printed during each stage (the last lines of each),
    # and how many lines it printed in all.
    output_by_stage: dict[str, str] = field(default_factory=dict)
    output_lines: int = 0
    # The host protection the learner's process ran under; None: it never said (it did not start).
    protection: ProtectionLevel | None = None
    # How much of it may be read: full, summary or verdict (trainer.checking.feedback).
    feedback: str = "full"
    # A bug of ours that stopped the check: then no verdict is given (exit 3).
    bug: CheckerBug | None = None

    @property
    def passed(self) -> bool:
        if self.bug is not None:
            return False
        verdicts = {s.id: s.verdict for s in self.stages}
        return (
            bool(self.stages)
            and all(verdicts.get(stage) is Verdict.PASS for stage in REQUIRED_STAGES)
            and all(
                v is Verdict.PASS
                or (
                    v is Verdict.SKIP
                    and stage in STAGE_BY_ID
                    and STAGE_BY_ID[stage].may_skip_in_a_pass
                )
                for stage, v in verdicts.items()
            )
        )

    @property
    def first_failure(self) -> StageResult | None:
        return next((s for s in self.stages if s.verdict is Verdict.FAIL), None)

    def verdict_sentence(self, seconds: float | None = None) -> VerdictSentence:
        """The verdict in one sentence; ``seconds``: the wait to name after a pass (by
        default the check's own; the API adds the start of its checking server)."""
        total = len(self.stages)
        failed = sum(s.verdict is Verdict.FAIL for s in self.stages)
        if self.passed:  # every required stage ran: "All 8", never "the stage"
            skipped = total - sum(s.verdict is Verdict.PASS for s in self.stages)
            extra = f" ({skipped} skipped)" if skipped else ""
            wait = self.seconds if seconds is None else seconds
            return VerdictSentence(
                True, f"All {total - skipped} stages passed", f"{extra} in {duration(wait)}"
            )
        failure = self.first_failure
        if failure is None:  # no failure, yet no pass: a stage a pass needs did not run
            if not total:
                return VerdictSentence(False, "Not passed", ": no stage ran")
            return VerdictSentence(False, "Not passed", f": {self._not_run()} did not run")
        stages = "stage" if total == 1 else "stages"
        return VerdictSentence(
            False, f"{failed} of {total} {stages} failed", f", first: {failure.title}"
        )

    def _not_run(self) -> str:
        """The title of the first stage whose skip (or absence) keeps a check from passing."""
        ran = {s.id: s.verdict for s in self.stages}
        for stage in STAGES:
            verdict = ran.get(stage.id)
            if (stage.required and verdict is not Verdict.PASS) or (
                verdict is Verdict.SKIP and not stage.may_skip_in_a_pass
            ):
                return stage.title
        return "a stage"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["passed"] = self.passed
        data["stages"] = [s.to_dict() for s in self.stages]
        data["protection"] = self.protection.to_dict() if self.protection else None
        data["bug"] = self.bug.to_dict() if self.bug else None
        return data
