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
            pictures=[p for p in data.get("pictures", []) if isinstance(p, dict)]
            if isinstance(data.get("pictures"), list)
            else [],
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

    @property
    def passed(self) -> bool:
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

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["passed"] = self.passed
        data["stages"] = [s.to_dict() for s in self.stages]
        return data
