"""`trainer review` (issue 32): passed exercises and missed quiz questions come due
again; a review works in review/EX.py and never touches the solved scratch file."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

import trainer.history
import trainer.interview
from tests.conftest import CATALOG, REPO, run_cli
from trainer import interview
from trainer.quiz import shuffled
from trainer.review import agenda, due_at, record_answers
from trainer.state import State, StateStore
from trainer.workspace import scratch_text

DAY = 86400.0
T0 = 1_760_000_000.0
SOLUTION = (REPO / "solutions" / "sigmoid.py").read_text()


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [T0]
    monkeypatch.setattr(trainer.history, "CLOCK", lambda: now[0])
    monkeypatch.setattr(trainer.interview, "CLOCK", lambda: now[0])
    return now


def _passed(workspace: Path, exercise: str = "sigmoid") -> StateStore:
    """The exercise started, solved in its scratch file and passed (at the clock's time)."""
    assert run_cli("start", exercise).exit_code == 0
    if exercise == "sigmoid":
        (workspace / "sigmoid.py").write_text(SOLUTION)
    store = StateStore(workspace)
    interview.record_check(store, exercise, True)
    return store


def _review(store: StateStore, exercise: str, passed: bool, clock: list[float]) -> float:
    """Open a review at the clock's time, check it once; returns days to the next."""
    with store.update() as state:
        state.progress(exercise).review = {
            **(state.progress(exercise).review or {}),
            "open": clock[0],
            "counted": False,
        }
    interview.record_check(store, exercise, passed, None, reviewing=True)
    due = due_at(store.load().exercises[exercise])
    assert due is not None
    return round((due - clock[0]) / DAY)


def test_intervals_grow_after_each_clean_review_and_shrink_after_a_failed_one(
    isolated_workspace: Path, clock: list[float]
):
    store = _passed(isolated_workspace)
    assert due_at(store.load().exercises["sigmoid"]) == T0 + DAY
    gaps = []
    for passed in (True, True, True, True, False, True):
        clock[0] += 40 * DAY
        gaps.append(_review(store, "sigmoid", passed, clock))
    assert gaps == [3, 7, 16, 35, 7, 16]


def test_only_the_first_check_of_a_review_is_its_result(
    isolated_workspace: Path, clock: list[float]
):
    store = _passed(isolated_workspace)
    clock[0] += 2 * DAY
    assert _review(store, "sigmoid", False, clock) == 1
    interview.record_check(store, "sigmoid", True, None, reviewing=True)
    review = store.load().exercises["sigmoid"].review or {}
    assert (review.get("failed"), review.get("clean"), review.get("open")) == (1, None, None)
    assert due_at(store.load().exercises["sigmoid"]) == T0 + 3 * DAY  # from the first check


def test_a_review_starts_afresh_in_its_own_file_and_never_touches_the_solved_one(
    isolated_workspace: Path, clock: list[float], warm_commands: None
):
    _passed(isolated_workspace)
    scratch = isolated_workspace / "sigmoid.py"
    before = (hashlib.sha256(scratch.read_bytes()).hexdigest(), scratch.stat().st_mtime_ns)
    clock[0] += 2 * DAY
    result = run_cli("review")
    assert result.exit_code == 0, result.stderr
    assert "Review of sigmoid, from a fresh stub in" in result.stdout
    review = isolated_workspace / "review" / "sigmoid.py"
    assert review.read_text() == scratch_text(CATALOG.get("sigmoid"))
    checked = run_cli("check")
    assert checked.exit_code == 1  # the review's stub, not the solved file
    said = " ".join(checked.stderr.split())
    assert "Review of sigmoid failed: it comes back sooner. The next review on" in said
    assert "(tomorrow)" in said
    assert "Review of sigmoid" not in run_cli("check").stderr  # only the first check counts
    after = (hashlib.sha256(scratch.read_bytes()).hexdigest(), scratch.stat().st_mtime_ns)
    assert after == before
    progress = StateStore(isolated_workspace).load().exercises["sigmoid"]
    assert (progress.review or {}).get("failed") == 1
    assert run_cli("review").stdout.count("Under way: sigmoid") == 1


def test_a_review_under_way_goes_on_in_its_file(isolated_workspace: Path, clock: list[float]):
    _passed(isolated_workspace)
    assert run_cli("review", "sigmoid").exit_code == 0
    review = isolated_workspace / "review" / "sigmoid.py"
    review.write_text("# half done\n")
    result = run_cli("review", "sigmoid")
    assert "goes on in" in result.stdout and review.read_text() == "# half done\n"


def test_review_with_nothing_due_says_when_the_next_one_is(
    isolated_workspace: Path, clock: list[float]
):
    assert "reviews begin a day after your first pass" in run_cli("review").stdout
    _passed(isolated_workspace)
    result = run_cli("review")
    assert result.exit_code == 0
    assert "Nothing is due for review. The next: sigmoid on " in result.stdout
    assert "(tomorrow)" in result.stdout


def test_a_review_of_an_exercise_not_passed_is_refused(isolated_workspace: Path):
    result = run_cli("review", "relu")
    assert result.exit_code != 0
    assert "`relu` is not passed yet: a review comes after a pass" in result.stderr


def test_list_shows_what_is_due_for_review(isolated_workspace: Path, clock: list[float]):
    _passed(isolated_workspace)
    assert "Due for review" not in run_cli("list").stdout
    clock[0] += 2 * DAY
    assert "Due for review: sigmoid: trainer review." in run_cli("list").stdout


def test_a_quiz_question_answered_wrongly_comes_due_and_review_asks_it(
    isolated_workspace: Path, clock: list[float]
):
    questions = shuffled(CATALOG.get("sigmoid").quiz, 7)
    wrong = "".join(f"{q.answer % len(q.choices) + 1}\n" for q in questions[:1])
    right = "".join(f"{q.answer}\n" for q in questions[1:])
    assert run_cli("quiz", "sigmoid", "--seed", "7", input=wrong + right).exit_code == 0
    assert "No quiz question is due" in run_cli("review", "--quiz").stdout
    clock[0] += DAY
    due = agenda(StateStore(isolated_workspace).load(), CATALOG.all).questions
    assert [d.question.question for d in due] == [questions[0].question]
    # The review shuffles the choices afresh: answer every number until one is right.
    result = run_cli("review", "--quiz", input="".join(f"{n}\n" for n in range(1, 5)))
    assert "1 quiz question due for review." in result.stdout
    assert "From the quiz of sigmoid" in result.stdout


def test_three_right_answers_at_review_retire_a_question():
    state = State()
    question = CATALOG.get("relu").quiz[0]
    record_answers(state, "relu", [(question, False)], reviewing=False)
    for _ in range(2):
        record_answers(state, "relu", [(question, True)], reviewing=True)
        assert len(state.quiz_reviews) == 1
    record_answers(state, "relu", [(question, True)], reviewing=True)
    assert state.quiz_reviews == {}
