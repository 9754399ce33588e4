"""Feedback levels: how much of a report the person checked may read.

``full`` is what a learner sees. ``summary`` names each stage and the mistake
it found, in words that hold no value of the checker's (no expected or wrong
numbers, no inputs, no pictures, nothing the code printed under the checker's
inputs), so that an instructor can grade without giving answers away.
``verdict`` says only pass, fail or skip per stage.

A level is applied to a finished :class:`CheckReport`, in one place, so that
every output (the console, ``--json``, a gradebook) shows the same amount.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from trainer.checking.report import CheckReport, StageResult, Verdict
from trainer.vocabulary import MISTAKES, STAGE_BY_ID

FEEDBACK_LEVELS = ("full", "summary", "verdict")
DEFAULT_FEEDBACK = "full"

_VERDICT_WORDS = {Verdict.PASS: "passed", Verdict.FAIL: "failed", Verdict.SKIP: "skipped"}


def with_feedback(
    report: CheckReport, level: str, declared_mistakes: Mapping[str, str] | None = None
) -> CheckReport:
    """``report`` as ``level`` shows it. ``declared_mistakes``: the words of the
    exercise's own mistakes (its spec's ``mistakes``), by id."""
    if level not in FEEDBACK_LEVELS:
        raise ValueError(f"unknown feedback level {level!r}")
    if level == "full":
        return replace(report, feedback=level)
    words = {**MISTAKES, **(declared_mistakes or {})}
    stages = [
        _summary(stage, words) if level == "summary" else _verdict_only(stage)
        for stage in report.stages
    ]
    return replace(
        report,
        stages=stages,
        output="",
        output_by_stage={},
        notes=list(report.notes) if level == "summary" else [],
        feedback=level,
    )


def _summary(stage: StageResult, words: Mapping[str, str]) -> StageResult:
    if stage.id == "load" or stage.verdict is Verdict.SKIP:
        # About the learner's own file (a syntax error's line, a missing class) or why
        # a stage did not run: no value of the checker's in it.
        message = stage.message
    else:
        checks = STAGE_BY_ID[stage.id].checks if stage.id in STAGE_BY_ID else stage.id
        message = checks if stage.verdict is Verdict.PASS else f"does not hold: {checks}"
    diagnosis = None
    mistake = (stage.diagnosis or {}).get("mistake")
    if stage.verdict is Verdict.FAIL and isinstance(mistake, str) and mistake in words:
        diagnosis = {"mistake": mistake, "text": words[mistake]}
        message += f". Looks like: {words[mistake]}"
    return StageResult(stage.id, stage.verdict, message, seconds=stage.seconds, diagnosis=diagnosis)


def _verdict_only(stage: StageResult) -> StageResult:
    return StageResult(
        stage.id, stage.verdict, _VERDICT_WORDS[stage.verdict], seconds=stage.seconds
    )
