"""The four commands driven through the real CLI: output, files and exit codes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import CATALOG, REPO, run_cli
from trainer.quiz import shuffled
from trainer.workspace import scratch_text


def _solution(exercise_id: str) -> str:
    return (REPO / "solutions" / f"{exercise_id}.py").read_text()


def test_start_writes_the_stub_and_shows_the_statement_and_next_steps(isolated_workspace: Path):
    result = run_cli("start", "sigmoid")
    assert result.exit_code == 0
    scratch = isolated_workspace / "sigmoid.py"
    assert scratch.read_text() == scratch_text(CATALOG.get("sigmoid"))
    assert "Sigmoid with a hand-written backward" in result.stdout
    assert "trainer check" in result.stdout
    assert "sigmoid.py" in result.stdout


def test_start_never_overwrites_an_edited_scratch_file(isolated_workspace: Path):
    run_cli("start", "sigmoid")
    scratch = isolated_workspace / "sigmoid.py"
    scratch.write_text("# my careful work\n")
    result = run_cli("start", "sigmoid")
    assert result.exit_code == 0
    assert scratch.read_text() == "# my careful work\n"
    assert "already has your edits" in result.stdout
    assert "--force" in result.stdout


def test_start_with_force_keeps_a_timestamped_backup_first(isolated_workspace: Path):
    run_cli("start", "sigmoid")
    scratch = isolated_workspace / "sigmoid.py"
    scratch.write_text("# my careful work\n")
    result = run_cli("start", "sigmoid", "--force")
    assert result.exit_code == 0
    backups = list((isolated_workspace / ".backups").glob("sigmoid-*.py"))
    assert len(backups) == 1
    assert backups[0].read_text() == "# my careful work\n"
    assert scratch.read_text() == scratch_text(CATALOG.get("sigmoid"))
    assert backups[0].name in result.stdout


def test_two_forced_starts_in_the_same_second_keep_both_backups(isolated_workspace: Path):
    run_cli("start", "sigmoid")
    scratch = isolated_workspace / "sigmoid.py"
    for text in ("# first\n", "# second\n"):
        scratch.write_text(text)
        run_cli("start", "sigmoid", "--force")
    kept = sorted(p.read_text() for p in (isolated_workspace / ".backups").iterdir())
    assert kept == ["# first\n", "# second\n"]


def test_start_with_an_unknown_id_exits_2_and_suggests_the_closest(isolated_workspace: Path):
    result = run_cli("start", "sigmoind")
    assert result.exit_code == 2
    assert "no exercise called `sigmoind` in the bundled exercises." in result.stderr
    assert "Did you mean `sigmoid`?" in result.stderr
    assert "sigmoid" in result.stderr and "trainer list" in result.stderr
    assert not isolated_workspace.exists()


def test_the_workspace_option_beats_the_environment(tmp_path: Path, isolated_workspace: Path):
    chosen = tmp_path / "my space"
    result = run_cli("start", "sigmoid", "--workspace", str(chosen))
    assert result.exit_code == 0
    assert (chosen / "sigmoid.py").is_file()
    assert not isolated_workspace.exists()


def test_a_workspace_under_a_missing_folder_is_a_clear_usage_error(tmp_path: Path):
    result = run_cli("start", "sigmoid", "--workspace", str(tmp_path / "nope" / "ws"))
    assert result.exit_code == 2
    assert "does not exist" in result.stderr


def test_check_without_a_scratch_file_exits_2_with_the_start_line(isolated_workspace: Path):
    result = run_cli("check", "sigmoid")
    assert result.exit_code == 2
    assert "no file at" in result.stderr
    assert "trainer start sigmoid" in result.stderr


def test_check_without_a_current_exercise_says_how_to_begin():
    result = run_cli("check")
    assert result.exit_code == 2
    assert "no current exercise" in result.stderr
    assert "trainer start sigmoid" in result.stderr


@pytest.mark.usefixtures("warm_commands")  # what it says; the solved file's check is cold
def test_check_of_the_untouched_stub_fails_with_a_friendly_message():
    run_cli("start", "sigmoid")
    result = run_cli("check")
    assert result.exit_code == 1
    assert "backward() is not written yet" in result.stdout
    assert "Forward parity" in result.stdout


def test_check_of_a_solved_scratch_file_passes_and_records_progress(isolated_workspace: Path):
    """End to end as a learner runs it: the check starts a checking server of its own."""
    run_cli("start", "sigmoid")
    (isolated_workspace / "sigmoid.py").write_text(_solution("sigmoid"))
    result = run_cli("check")
    assert result.exit_code == 0, result.stdout
    assert re.search(r"All \d+ stages passed", result.stdout)
    assert "trainer quiz sigmoid" in result.stdout  # not a terminal: says how to take it
    state = json.loads((isolated_workspace / ".trainer-state.json").read_text())
    assert state["exercises"]["sigmoid"]["passed"] is True
    assert state["exercises"]["sigmoid"]["checks"] == 1
    listing = run_cli("list")
    assert "passed" in listing.stdout


@pytest.mark.usefixtures("warm_commands")
def test_check_json_prints_exactly_one_document_with_every_stage(isolated_workspace: Path):
    run_cli("start", "sigmoid")
    result = run_cli("check", "--json")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["exercise"] == "sigmoid"
    assert report["passed"] is False
    ids = [s["id"] for s in report["stages"]]
    verdicts = {s["id"]: s["verdict"] for s in report["stages"]}
    assert ids[:4] == ["load", "forward", "backward", "contract"]
    assert ids[-3:] == ["gradcheck", "cuda", "by_hand"]  # by_hand reports the whole check
    assert verdicts["load"] == verdicts["forward"] == "pass"
    assert verdicts["backward"] == verdicts["contract"] == verdicts["gradcheck"] == "fail"
    assert all(s["message"] for s in report["stages"])


def test_hint_reveals_one_more_hint_each_time_and_remembers():
    exercise = CATALOG.get("sigmoid")
    run_cli("start", "sigmoid")
    first = run_cli("hint")
    assert "Hint 1 of" in first.stdout
    assert exercise.hints[0].split()[0] in first.stdout
    second = run_cli("hint")
    assert "Hint 2 of" in second.stdout
    for _ in range(len(exercise.hints)):
        last = run_cli("hint")
    assert f"Hint {len(exercise.hints)} of {len(exercise.hints)}" in last.stdout
    assert "last hint" in last.stdout
    listing = run_cli("list")
    assert f"{len(exercise.hints)}/{len(exercise.hints)}" in listing.stdout


def test_hint_all_shows_every_hint():
    exercise = CATALOG.get("sigmoid")
    result = run_cli("hint", "sigmoid", "--all")
    assert result.exit_code == 0
    for number in range(1, len(exercise.hints) + 1):
        assert f"Hint {number} of {len(exercise.hints)}" in result.stdout


def test_quiz_reads_answers_from_stdin_and_saves_the_best_score(isolated_workspace: Path):
    exercise = CATALOG.get("sigmoid")
    questions = shuffled(exercise.quiz, 7)
    right = "".join(f"{q.answer}\n" for q in questions)
    wrong = "".join(f"{q.answer % len(q.choices) + 1}\n" for q in questions)
    total = len(exercise.quiz)

    result = run_cli("quiz", "sigmoid", "--seed", "7", input=wrong)
    assert result.exit_code == 0
    assert "Not quite" in result.stdout
    assert f"Score: 0 of {total}" in result.stdout

    result = run_cli("quiz", "sigmoid", "--seed", "7", input=right)
    assert f"Score: {total} of {total}" in result.stdout
    assert exercise.quiz[0].explanation.split()[0] in result.stdout

    run_cli("quiz", "sigmoid", "--seed", "7", input=wrong)
    state = json.loads((isolated_workspace / ".trainer-state.json").read_text())
    assert state["exercises"]["sigmoid"]["quiz_best"] == total


def test_quiz_asks_again_after_an_answer_that_is_not_a_choice():
    exercise = CATALOG.get("sigmoid")
    questions = shuffled(exercise.quiz, 3)
    answers = "banana\n9\n" + "".join(f"{q.answer}\n" for q in questions)
    result = run_cli("quiz", "sigmoid", "--seed", "3", input=answers)
    assert result.exit_code == 0
    assert result.stdout.count("Please type a number from 1 to") == 2
    assert f"Score: {len(exercise.quiz)} of {len(exercise.quiz)}" in result.stdout


def test_quiz_that_runs_out_of_input_saves_nothing_and_exits_2(isolated_workspace: Path):
    result = run_cli("quiz", "sigmoid", input="1\n")
    assert result.exit_code == 2
    assert "no more input" in result.stderr
    assert not (isolated_workspace / ".trainer-state.json").exists()


def test_list_shows_every_exercise_with_difficulty_and_status():
    run_cli("start", "sigmoid")
    result = run_cli("list")
    assert result.exit_code == 0
    for exercise in CATALOG.all:
        assert exercise.id in result.stdout
    assert "started" in result.stdout
    assert f"0 of {len(CATALOG.all)} passed" in result.stdout


def test_a_damaged_progress_file_is_moved_aside_and_never_crashes(isolated_workspace: Path):
    run_cli("start", "sigmoid")
    (isolated_workspace / ".trainer-state.json").write_text("{ not json")
    result = run_cli("hint", "sigmoid")
    assert result.exit_code == 0
    assert "progress starts afresh" in result.stderr
    assert list(isolated_workspace.glob(".trainer-state.json.broken-*"))
    assert json.loads((isolated_workspace / ".trainer-state.json").read_text())["version"] == 1


def test_python_dash_m_trainer_runs_the_cli():
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "trainer", "--help"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0
    for command in ("start", "check", "hint", "quiz", "list"):
        assert command in result.stdout


def test_quiz_concepts_asks_the_shared_questions_and_keeps_the_best_score():
    answers = "1\n" * 20
    result = run_cli("quiz", "concepts", "--seed", "0", input=answers)
    assert result.exit_code == 0, result.stdout
    assert "Question 1 of 14." in result.stdout  # the concepts quiz, not an exercise's
    assert "of 14. Best so far:" in result.stdout
