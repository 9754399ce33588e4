"""The follow-up loop beyond `check` and `followup` (issue 31 §2): `trainer list` counts
the follow-ups passed, the interview asks one after a pass, and the notebook and the
`check()` API do what the command line does."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import CATALOG, REPO, run_cli
from trainer import console
from trainer.notebook import Command, TrainerMagics, parse
from trainer.state import State, StateStore


def _follow_up_passed(workspace: Path) -> State:
    workspace.mkdir(exist_ok=True)
    with StateStore(workspace).update() as state:
        state.current = "softmax"
        progress = state.progress("softmax")
        progress.passed = True
        progress.follow_ups_passed = ["no_jacobian"]
    return StateStore(workspace).load()


# trainer list ---------------------------------------------------------------------------


def _line_of(text: str, exercise: str) -> str:
    (line,) = [line for line in text.splitlines() if re.search(rf"\s{exercise}\s", line + " ")]
    return line


def test_list_shows_how_many_follow_ups_are_passed_of_how_many_at_80_columns(
    isolated_workspace: Path,
):
    state = _follow_up_passed(isolated_workspace)
    with console.captured(80) as shown:
        console.exercise_list(CATALOG.all, state, isolated_workspace)
    text = shown.getvalue()
    assert all(len(line) <= 80 for line in text.splitlines())
    assert text.splitlines()[0].split()[-1] == "F-ups"
    assert _line_of(text, "softmax").endswith("passed     0/3      –  –       1/2")
    assert _line_of(text, "tanh").endswith(f"0/{len(CATALOG.get('tanh').follow_ups)}")
    assert _line_of(text, "relu").endswith("–  –")  # no follow-ups: nothing to count


@pytest.fixture
def short_terminal() -> Iterator[io.StringIO]:
    """`console.out` as a terminal of 80 × 40: too short for a line per exercise."""
    from rich.console import Console

    buffer = io.StringIO()
    saved = console.out._console
    console.out._console = Console(
        file=buffer, width=80, height=40, force_terminal=True, color_system=None
    )
    try:
        yield buffer
    finally:
        console.out._console = saved


def test_the_list_on_a_short_terminal_counts_the_follow_ups_of_a_passed_exercise(
    isolated_workspace: Path, short_terminal: io.StringIO
):
    state = _follow_up_passed(isolated_workspace)
    console.exercise_list(CATALOG.all, state, isolated_workspace)
    text = short_terminal.getvalue()
    assert "✔ passed, 1/2 follow-ups, ○ started, seen: solution, → current" in text
    assert "→ softmax ✔ 1/2" in text
    assert "sigmoid ✔" not in text and "sigmoid 0/" not in text  # not passed: no count yet


def test_the_notebook_list_has_a_follow_ups_column(isolated_workspace: Path):
    from trainer.notebook_view import exercise_list

    table, _ = exercise_list(CATALOG.all, _follow_up_passed(isolated_workspace))
    assert "<th" in (table.html or "") and ">Follow-ups</th>" in (table.html or "")
    row = _line_of(table.text, "softmax")
    assert re.search(r"✔ passed\s+1/2\s+0/3", row), row
    assert "1/2" in _line_of(table.text, "softmax") and "/2" not in _line_of(table.text, "relu")


# The interview ---------------------------------------------------------------------------


class _Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    from trainer import interview

    fake = _Clock()
    monkeypatch.setattr(interview, "CLOCK", fake)
    return fake


SOFTMAX_FOLLOW_UPS = ("no_jacobian", "fast")


def _interview_on_softmax(workspace: Path, minutes: float = 30) -> StateStore:
    from trainer import interview

    workspace.mkdir(exist_ok=True)
    store = StateStore(workspace)
    interview.begin(store, CATALOG.get("softmax"), minutes)
    return store


def test_an_interview_pass_asks_the_next_follow_up_not_passed_takes_it_up_and_goes_on(
    isolated_workspace: Path, clock: _Clock
):
    from trainer.interview import record_check

    store = _interview_on_softmax(isolated_workspace)
    with store.update() as state:
        state.progress("softmax").follow_ups_passed = ["no_jacobian"]
    clock.now += 300
    counted = record_check(store, "softmax", True, follow_ups=SOFTMAX_FOLLOW_UPS)
    assert counted.asked == "fast" and counted.ended is None
    assert counted.left == 25 * 60
    state = store.load()
    assert state.interview is not None and state.interview.follow_up == "fast"
    assert state.interview.passed_after == 300
    assert state.progress("softmax").follow_up == "fast"  # taken up: checks grade it
    assert state.progress("softmax").passed


def test_the_interview_ends_when_its_follow_up_passes_and_says_it_was_answered(
    isolated_workspace: Path, clock: _Clock
):
    from trainer.interview import record_check

    store = _interview_on_softmax(isolated_workspace)
    clock.now += 300
    record_check(store, "softmax", True, follow_ups=SOFTMAX_FOLLOW_UPS)
    clock.now += 60
    assert record_check(store, "softmax", False, follow_ups=SOFTMAX_FOLLOW_UPS).ended is None
    clock.now += 100
    ended = record_check(store, "softmax", True, follow_ups=SOFTMAX_FOLLOW_UPS).ended
    assert ended is not None and ended.passed and ended.follow_up_answered
    assert (ended.seconds, ended.follow_up_seconds, ended.checks) == (300, 160, 3)
    assert ended.follow_up_words == "no_jacobian: answered 2:40 after the pass"
    state = store.load()
    assert state.interview is None
    best = state.progress("softmax").best_interview
    assert best is not None and best["follow_up_outcome"] == "answered"


def test_a_follow_up_left_unanswered_when_the_time_is_up_leaves_the_interview_passed(
    isolated_workspace: Path, clock: _Clock
):
    from trainer.interview import expire_if_due, record_check

    store = _interview_on_softmax(isolated_workspace, minutes=10)
    clock.now += 240
    record_check(store, "softmax", True, follow_ups=SOFTMAX_FOLLOW_UPS)
    clock.now += 11 * 60
    ended = expire_if_due(store)
    assert ended is not None and ended.reason == "passed" and ended.seconds == 240
    assert not ended.follow_up_answered
    assert ended.follow_up_words == "no_jacobian: not answered (time up 6:00 after the pass)"


def test_an_interview_on_an_exercise_whose_follow_ups_are_all_passed_ends_on_the_pass(
    isolated_workspace: Path, clock: _Clock
):
    from trainer.interview import record_check

    store = _interview_on_softmax(isolated_workspace)
    with store.update() as state:
        state.progress("softmax").follow_ups_passed = list(SOFTMAX_FOLLOW_UPS)
    counted = record_check(store, "softmax", True, follow_ups=SOFTMAX_FOLLOW_UPS)
    assert counted.asked is None and counted.ended is not None
    assert counted.ended.follow_up is None and counted.ended.follow_up_words is None


def test_before_its_pass_an_interview_checks_the_exercise_without_the_follow_up_taken_up(
    isolated_workspace: Path, clock: _Clock
):
    from trainer.interview import record_check
    from trainer.session import Session

    store = _interview_on_softmax(isolated_workspace)
    with store.update() as state:
        state.progress("softmax").follow_up = "fast"  # taken up before the interview
    softmax = CATALOG.get("softmax")
    assert Session().checked_exercise(softmax).active_follow_up is None
    record_check(store, "softmax", True, follow_ups=SOFTMAX_FOLLOW_UPS)
    assert Session().checked_exercise(softmax).active_follow_up == "no_jacobian"
    with store.update() as state:
        state.interview = None
    assert Session().checked_exercise(softmax).active_follow_up == "no_jacobian"


def test_the_interview_summary_has_a_follow_up_row_at_80_columns_and_in_the_notebook():
    from trainer.interview import InterviewSummary
    from trainer.notebook_view import interview_summary

    summary = InterviewSummary(
        "softmax", "passed", 300, 30, 3, 0, "no_jacobian", "stopped", 75
    )  # fmt: skip
    with console.captured(80) as shown:
        console.interview_summary(summary)
    assert re.search(
        r"Follow-up\s+│ no_jacobian: not answered \(stopped 1:15 after the pass\)", shown.getvalue()
    )
    words = interview_summary(summary).text
    assert "hints used: 0; follow-up no_jacobian: not answered (stopped 1:15 after" in words


def test_stats_say_whether_an_interview_s_follow_up_was_answered(
    isolated_workspace: Path, clock: _Clock
):
    from trainer.charts import stats_text
    from trainer.interview import record_check
    from trainer.stats import compute

    store = _interview_on_softmax(isolated_workspace)
    clock.now += 600
    record_check(store, "softmax", True, follow_ups=SOFTMAX_FOLLOW_UPS)
    record_check(store, "softmax", True, follow_ups=SOFTMAX_FOLLOW_UPS)
    text = " ".join(" ".join(stats_text(compute(store.load(), CATALOG.all), 80)).split())
    assert "softmax: passed in 10 min of 30 min; follow-up no_jacobian answered" in text


def test_an_interview_on_softmax_asks_a_follow_up_after_the_pass_and_ends_when_it_is_answered(
    isolated_workspace: Path, clock: _Clock, warm_commands: None
):
    import shutil

    started = run_cli("interview", "softmax", "--minutes", "30")
    assert "After the pass the interviewer asks a follow-up" in " ".join(started.stdout.split())
    answer = isolated_workspace / "interview" / "softmax.py"
    shutil.copy(REPO / "solutions" / "wrong" / "softmax" / "builds_the_jacobian.py", answer)
    clock.now += 120
    passed = run_cli("check")
    words = " ".join(passed.stdout.split())
    assert passed.exit_code == 0, words
    assert "The interviewer asks a follow-up, 28:00 left: the interview ends when" in words
    assert "Follow-up 1 of 2: no_jacobian" in words
    assert "Interview on softmax" not in words and "(2 left)" not in words
    failing = run_cli("check")
    words = " ".join(failing.stdout.split())
    assert failing.exit_code == 1
    assert "backward's working memory is too large" in words and "Interview: 28:00 left." in words
    shutil.copy(REPO / "solutions" / "softmax.py", answer)
    clock.now += 60
    answered = run_cli("check")
    assert answered.exit_code == 0
    assert "Interview on softmax: passed" in answered.stdout
    assert re.search(r"Time taken\s*│\s*2:00 of 30:00", answered.stdout)
    assert re.search(r"Follow-up\s*│\s*no_jacobian: answered 1:00 after the pass", answered.stdout)
    assert "The interviewer has a follow-up question (1 left)" in " ".join(answered.stdout.split())
    progress = StateStore(isolated_workspace).load().progress("softmax")
    assert progress.follow_ups_passed == ["no_jacobian"]


# The notebook and the check() API -----------------------------------------------------------


class _Shell:
    def __init__(self) -> None:
        self.user_ns: dict[str, object] = {}

    def set_next_input(self, s: str, replace: bool = False) -> None:
        pass


def _headless(prompt: str) -> str:
    raise EOFError


@pytest.fixture
def notebook() -> tuple[TrainerMagics, list[object]]:
    shown: list[object] = []
    return TrainerMagics(_Shell(), display=shown.append, ask=_headless), shown


def _said(shown: list[object]) -> str:
    from trainer.notebook_view import Shown

    return "\n".join(repr(item) if isinstance(item, Shown) else str(item) for item in shown)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("followup", Command("followup")),
        ("followup softmax --list", Command("followup", "softmax", show_list=True)),
        ("explain softmax", Command("explain", "softmax")),
        ("explain --force -w ws", Command("explain", force=True, workspace=Path("ws"))),
    ],
)
def test_the_followup_and_explain_magics_parse_as_the_commands_do(line, expected):
    assert parse(line, cell=False) == expected


def test_the_followup_magic_asks_the_next_question_takes_it_up_and_lists_them_all(
    notebook, isolated_workspace: Path
):
    magic, shown = notebook
    magic.trainer("followup softmax")
    said = _said(shown)
    assert "**Follow-up 1 of 2: no_jacobian**" in said
    assert "> Your backward is right. How much memory does it allocate" in said
    assert "Hint 2: Write the product for one element" in said
    assert 'grades it too, as the stage "Follow-up: working memory"' in said
    assert "`%trainer check softmax`" in said
    assert StateStore(isolated_workspace).load().progress("softmax").follow_up == "no_jacobian"
    shown.clear()
    magic.trainer("followup softmax --list")
    assert _said(shown).splitlines()[:2] == [
        "1. **no_jacobian** (taken up): Your backward is right. How much memory does it "
        "allocate while it runs, on a batch of long rows? Would it still fit for rows of "
        "50,000 classes?",
        "2. **fast**: How long does your backward take on a batch of thousands of short rows, "
        "compared with torch's own softmax backward?",
    ]
    shown.clear()
    magic.trainer("followup relu")
    assert _said(shown) == "The interviewer has no follow-up for relu."


def test_the_explain_magic_shows_the_derivation_after_a_pass_and_before_one_only_when_forced(
    notebook, isolated_workspace: Path
):
    from IPython.core.error import UsageError

    magic, shown = notebook
    magic.trainer("start softmax")
    shown.clear()
    with pytest.raises(UsageError, match=r"see it anyway with `%trainer explain softmax --force`"):
        magic.trainer("explain")
    assert StateStore(isolated_workspace).load().progress("softmax").hints_shown == 0
    magic.trainer("explain --force")
    assert _said(shown).startswith("How the gradient is derived: softmax (not passed yet)\n\n")
    hints = len(CATALOG.get("softmax").hints)
    assert StateStore(isolated_workspace).load().progress("softmax").hints_shown == hints
    with StateStore(isolated_workspace).update() as state:
        state.progress("softmax").passed = True
    shown.clear()
    magic.trainer("explain softmax")
    (derivation,) = shown
    assert _said(shown).startswith("How the gradient is derived: softmax\n\n")
    assert "∂L/∂x = y ⊙ (g − Σ g ⊙ y)" in _said(shown)
    assert "<pre>" in (getattr(derivation, "html", None) or "")


def test_the_explain_magic_asks_before_a_pass_where_the_notebook_can_answer(isolated_workspace):
    shown: list[object] = []
    answers = iter(["n", "y"])
    magic = TrainerMagics(_Shell(), display=shown.append, ask=lambda _: next(answers))
    magic.trainer("explain softmax")
    assert _said(shown) == "Good call. `%trainer hint softmax` reveals one more hint."
    magic.trainer("explain softmax")
    assert "How the gradient is derived: softmax (not passed yet)" in _said(shown)


JACOBIAN = (REPO / "solutions" / "wrong" / "softmax" / "builds_the_jacobian.py").read_text()
RIGHT = (REPO / "solutions" / "softmax.py").read_text()


@pytest.fixture
def warm_server(warm_commands: None) -> Iterator[None]:
    from trainer.api import close_service

    yield
    close_service()


def test_a_notebook_check_says_a_follow_up_waits_then_grades_it_as_its_own_stage(
    notebook, isolated_workspace: Path, warm_server: None
):
    magic, _ = notebook
    first = magic.run(parse("check softmax", cell=True), JACOBIAN)
    assert first is not None and first.passed
    assert first.follow_up is not None and first.follow_up.graded is None
    assert "The interviewer has a follow-up question (2 left): `%trainer followup softmax`." in (
        first.advice
    )
    magic.trainer("followup")
    failing = magic.run(parse("check softmax", cell=True), JACOBIAN)
    assert failing is not None and not failing.passed
    assert failing.follow_up is not None and failing.follow_up.graded is not None
    assert failing.follow_up.graded.id == "no_jacobian"
    (stage,) = failing.follow_up.stages
    assert (stage.title, stage.verdict.value) == ("Follow-up: working memory", "fail")
    assert "backward's working memory is too large" in stage.message
    assert "Follow-up: working memory" in (failing._repr_html_() or "")
    passing = magic.run(parse("check softmax", cell=True), RIGHT)
    assert passing is not None and passing.passed
    assert passing.advice.startswith(
        "Follow-up no_jacobian passed. The interviewer has a follow-up question (1 left): "
        "`%trainer followup softmax`."
    )
    assert passing.to_dict()["follow_up"] == {
        "id": "no_jacobian",
        "stages": ["follow_up_memory"],
        "passed": True,
        "left": 1,
        "asked": None,
    }
    assert "Follow-up no_jacobian passed." in str(passing)


def test_the_check_api_grades_the_follow_up_taken_up_as_trainer_check_does(
    isolated_workspace: Path, warm_server: None, write_file
):
    from trainer import check

    assert run_cli("followup", "softmax").exit_code == 0
    report = check("softmax", write_file("answer.py", JACOBIAN))
    assert not report.passed
    assert report.failure is not None and report.failure.id == "follow_up_memory"
    assert report.follow_up is not None and not report.follow_up.passed
    assert [s.id for s in report.follow_up.stages] == ["follow_up_memory"]
    assert report.to_dict()["follow_up"]["id"] == "no_jacobian"


def test_a_notebook_check_that_passes_an_interview_shows_the_interviewer_s_follow_up(
    notebook, isolated_workspace: Path, clock: _Clock, warm_server: None
):
    magic, shown = notebook
    _interview_on_softmax(isolated_workspace)
    report = magic.run(parse("check softmax", cell=True), RIGHT)
    assert report is not None and report.passed
    assert report.follow_up is not None and report.follow_up.asked is not None
    assert report.advice.startswith(
        "The interviewer asks a follow-up, no_jacobian (`%trainer followup softmax` shows it "
        "again): every check grades it from now on."
    )
    said = _said(shown)
    assert said.rindex("**Follow-up 1 of 2: no_jacobian**") > said.rindex("Checked softmax.py")
    state = StateStore(isolated_workspace).load()
    assert state.interview is not None and state.interview.follow_up == "no_jacobian"
