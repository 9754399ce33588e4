"""A check's verdict in one sentence, built once by the report
(:meth:`trainer.checking.report.CheckReport.verdict_sentence`), said alike by the console,
the notebook and ``str()`` of the API's report."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from tests.conftest import CATALOG
from trainer import console
from trainer.api import Report
from trainer.checking.report import CheckReport, StageResult, Verdict
from trainer.notebook_view import report_text


def _stage(stage_id: str, verdict: Verdict) -> StageResult:
    return StageResult(stage_id, verdict, f"{stage_id}: what happened")


REQUIRED = [(stage, Verdict.PASS) for stage in ("load", "forward", "backward", "contract")]
REPORTS = {
    "a pass": [*REQUIRED, ("cuda", Verdict.SKIP)],
    "a failure": [("load", Verdict.PASS), ("backward", Verdict.FAIL), ("state", Verdict.FAIL)],
    "a required stage skipped": [*REQUIRED[:2], ("backward", Verdict.SKIP), REQUIRED[3]],
}
SENTENCES = {
    "a pass": "All 4 stages passed (1 skipped) in 0.25 s",
    "a failure": "2 of 3 stages failed, first: Backward parity",
    "a required stage skipped": "Not passed: Backward parity did not run",
}


@pytest.mark.parametrize("case", REPORTS)
def test_the_console_and_the_notebook_say_the_one_verdict_sentence_the_report_builds(case):
    raw = CheckReport(
        exercise="sigmoid",
        file="/tmp/sigmoid.py",
        file_sha256="0" * 64,
        seed=0,
        stages=[_stage(i, v) for i, v in REPORTS[case]],
        seconds=0.25,
    )
    sentence = raw.verdict_sentence()
    assert str(sentence) == SENTENCES[case]
    assert sentence.passed is raw.passed
    with console.captured(width=200) as printed:
        console.check_summary(raw, CATALOG.get("sigmoid"))
    mark = "✔" if raw.passed else "✘"
    assert printed.getvalue().startswith(f"{mark} {sentence}.")
    report = Report(raw, warm=True, advice="Next.")
    assert str(report.verdict_sentence) == str(sentence)
    assert f"{mark} {sentence} (" in report_text(report).splitlines()[-1]


def test_the_console_colours_the_head_of_the_verdict_sentence_alone(monkeypatch):
    """What a terminal shows: "✘ 2 of 3 stages failed" in bold red, the rest plain
    but the commands to run (a base style would colour the whole line)."""
    buffer = io.StringIO()
    terminal = Console(file=buffer, width=200, force_terminal=True, color_system="standard")
    monkeypatch.setattr(console.out, "_console", terminal)
    raw = CheckReport("sigmoid", "/tmp/sigmoid.py", "0" * 64, 0, [])
    raw.stages = [_stage(i, v) for i, v in REPORTS["a failure"]]
    console.check_summary(raw, CATALOG.get("sigmoid"))
    red, bold, plain = "\x1b[1;31m", "\x1b[1m", "\x1b[0m"
    assert buffer.getvalue().startswith(
        f"{red}✘ 2 of 3 stages failed{plain}, first: Backward parity. Fix sigmoid.py and run "
        f"{bold}trainer check{plain} again; stuck? {bold}trainer hint sigmoid{plain}."
    )


def test_a_wait_has_two_decimals_under_a_second_and_one_above_and_a_missing_stage_is_named():
    stages = [_stage(i, v) for i, v in REQUIRED]
    raw = CheckReport("relu", "relu.py", "0" * 64, 0, stages, 12.345)
    assert str(raw.verdict_sentence()) == "All 4 stages passed in 12.3 s"
    assert str(raw.verdict_sentence(0.1234)) == "All 4 stages passed in 0.12 s"
    stages[1:] = []  # the checker stopped after loading, without a failure
    assert str(raw.verdict_sentence()) == "Not passed: Forward parity did not run"
    stages[:] = []
    assert str(raw.verdict_sentence()) == "Not passed: no stage ran"
