"""Issue 14: what a new learner tripped over, each point through the real CLI."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.conftest import CATALOG, REPO, run_cli
from tests.terminal import Terminal, plain
from trainer.cli import app
from trainer.quiz import shuffled
from trainer.settings import SETTINGS_FILE
from trainer.spec import TRACKS
from trainer.state import StateStore
from trainer.workspace import scratch_text

# What the in-process commands say and record (`trainer(...)` runs a real process), on the worker's warm checking server.
pytestmark = pytest.mark.usefixtures("warm_commands")


def trainer(
    *args: str, cwd: Path, columns: int = 80, workspace: Path | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    """``python -m trainer ARGS`` in a terminal of ``columns`` (piped, as in a script)."""
    environment = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "COLUMNS": str(columns)}
    if workspace is not None:
        environment["TRAINER_WORKSPACE"] = str(workspace)
    return subprocess.run(
        [sys.executable, "-m", "trainer", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**environment, **env},
        check=False,
    )


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[list[Terminal]]:
    opened: list[Terminal] = []
    yield opened
    for each in opened:
        each.close()


# Finding things


def test_commands_find_the_workspace_from_inside_it_and_from_folders_below(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.delenv("TRAINER_WORKSPACE")
    assert run_cli("start", "sigmoid").exit_code == 0  # creates ./trainer-workspace
    monkeypatch.chdir(tmp_path / "trainer-workspace")
    assert "Hint 1 of" in run_cli("hint").stdout
    deeper = tmp_path / "notes" / "week1"
    deeper.mkdir(parents=True)
    monkeypatch.chdir(deeper)
    listing = run_cli("list")
    assert re.search(r"→ sigmoid .* started", listing.stdout)
    assert not (deeper / "trainer-workspace").exists()


def test_every_not_found_message_names_the_workspace_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.delenv("TRAINER_WORKSPACE")
    expected = str(tmp_path / "trainer-workspace")
    listing = run_cli("list")
    assert "No workspace here or above: trainer next makes one." in listing.stdout
    missing = run_cli("hint")
    assert missing.exit_code == 2
    assert f"no workspace at {expected}" in missing.stderr
    (tmp_path / "trainer-workspace").mkdir()
    empty = run_cli("check")
    assert f"no current exercise in the workspace {expected}" in empty.stderr
    listing = run_cli("list")
    assert "0 of" in listing.stdout


def test_exercise_folders_given_once_are_remembered_by_the_workspace(
    tmp_path: Path, isolated_workspace: Path
):
    mine = tmp_path / "my-exercises"
    assert run_cli("new", "triple", "--root", str(mine)).exit_code == 0
    assert run_cli("--exercises-dir", str(mine), "start", "triple").exit_code == 0
    settings = json.loads((isolated_workspace / SETTINGS_FILE).read_text())
    assert settings["exercise_dirs"] == [str(mine.resolve())]
    result = run_cli("hint")  # the next step the start printed, with no option
    assert result.exit_code == 0, result.stderr
    assert "Hint 1 of" in result.stdout


def test_no_exercise_called_says_where_it_looked(tmp_path: Path):
    mine = tmp_path / "my-exercises"
    run_cli("new", "triple", "--root", str(mine))
    result = run_cli("start", "quadruple", "--exercises-dir", str(mine))
    assert result.exit_code == 2
    assert (
        f"no exercise called `quadruple` in the bundled exercises and {mine / 'exercises'}"
        in result.stderr
    )
    assert "--exercises-dir" in run_cli("start", "quadruple").stderr


def _recording_editor(tmp_path: Path, name: str) -> tuple[str, Path]:
    log = tmp_path / f"{name}.log"
    script = tmp_path / f"{name}.py"
    script.write_text(f"import sys, pathlib\npathlib.Path({str(log)!r}).write_text(sys.argv[-1])\n")
    return f"{sys.executable} {script}", log


def test_open_runs_visual_else_editor_on_the_scratch_file(
    tmp_path: Path, isolated_workspace: Path, monkeypatch: pytest.MonkeyPatch
):
    run_cli("start", "sigmoid")
    editor, editor_log = _recording_editor(tmp_path, "editor")
    visual, visual_log = _recording_editor(tmp_path, "visual")
    monkeypatch.setenv("EDITOR", editor)
    assert run_cli("open").exit_code == 0
    assert editor_log.read_text() == str(isolated_workspace / "sigmoid.py")
    monkeypatch.setenv("VISUAL", visual)
    assert run_cli("open", "sigmoid").exit_code == 0
    assert visual_log.read_text() == str(isolated_workspace / "sigmoid.py")


def test_open_without_an_editor_prints_the_path_and_says_how_to_set_one(
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.delenv("EDITOR", raising=False)
    run_cli("start", "sigmoid")
    result = run_cli("open")
    assert result.exit_code == 0
    assert "sigmoid.py" in result.stdout and "$EDITOR" in result.stdout


def test_open_with_an_editor_that_cannot_run_is_a_clear_error(monkeypatch: pytest.MonkeyPatch):
    run_cli("start", "sigmoid")
    monkeypatch.setenv("EDITOR", "no-such-editor-anywhere --wait")
    result = run_cli("open")
    assert result.exit_code == 2
    assert "cannot run your editor `no-such-editor-anywhere --wait`" in result.stderr


def test_scratch_paths_are_clickable_links_in_a_terminal_and_plain_when_piped(
    tmp_path: Path, terminal: list[Terminal]
):
    workspace = tmp_path / "ws"
    shown = Terminal("start", "sigmoid", cwd=tmp_path, env={"TRAINER_WORKSPACE": str(workspace)})
    terminal.append(shown)
    assert shown.wait() == 0
    assert "\x1b]8;id=" in shown.output or "\x1b]8;;" in shown.output
    assert (workspace / "sigmoid.py").as_uri() in shown.output
    piped = trainer("reset", "sigmoid", cwd=tmp_path, workspace=workspace)
    assert "\x1b]8" not in piped.stdout and "sigmoid.py" in piped.stdout


def test_reset_all_backs_up_every_edited_file_after_one_confirmation(
    tmp_path: Path, terminal: list[Terminal]
):
    workspace = tmp_path / "ws"
    for exercise in ("sigmoid", "relu", "tanh"):
        trainer("start", exercise, cwd=tmp_path, workspace=workspace)
    (workspace / "sigmoid.py").write_text("# my sigmoid\n")
    (workspace / "relu.py").write_text("# my relu\n")
    asked = Terminal("reset", "--all", cwd=tmp_path, env={"TRAINER_WORKSPACE": str(workspace)})
    terminal.append(asked)
    shown = asked.wait_for(r"\[y/N\]")
    assert shown.count("[y/N]") == 1 and "Reset 3 scratch files" in shown
    asked.type("y\n")
    assert asked.wait() == 0
    backups = sorted(p.read_text() for p in (workspace / ".backups").iterdir())
    assert backups == ["# my relu\n", "# my sigmoid\n"]
    for exercise in ("sigmoid", "relu", "tanh"):
        assert (workspace / f"{exercise}.py").read_text() == scratch_text(CATALOG.get(exercise))


def test_reset_all_without_a_terminal_needs_yes_and_changes_nothing_without_it(
    isolated_workspace: Path,
):
    run_cli("start", "sigmoid")
    (isolated_workspace / "sigmoid.py").write_text("# mine\n")
    refused = run_cli("reset", "--all")
    assert refused.exit_code == 2 and "--yes" in refused.stderr
    assert (isolated_workspace / "sigmoid.py").read_text() == "# mine\n"
    done = run_cli("reset", "--all", "--yes")
    assert done.exit_code == 0
    assert [p.read_text() for p in (isolated_workspace / ".backups").iterdir()] == ["# mine\n"]


def test_the_scratch_file_opens_with_the_statement_and_its_stub_still_fails_as_not_written(
    isolated_workspace: Path,
):
    exercise = CATALOG.get("relu")
    run_cli("start", "relu")
    text = (isolated_workspace / "relu.py").read_text()
    assert text.startswith(f"# relu: {exercise.title}\n#\n# Write the backward pass")
    assert text.endswith(exercise.stub)
    assert all(len(line) <= 80 for line in text.splitlines()[: text.count("\n# ")])
    result = run_cli("check", "--json")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    load = next(s for s in report["stages"] if s["id"] == "load")
    backward = next(s for s in report["stages"] if s["id"] == "backward")
    assert load["verdict"] == "pass"
    assert "backward() is not written yet" in backward["message"]


# Reports that fit a screen


def test_a_failing_report_shows_each_error_once_and_fits_a_screen_at_80_columns(
    tmp_path: Path,
):
    workspace = tmp_path / "ws"
    trainer("start", "relu", cwd=tmp_path, workspace=workspace)
    result = trainer("check", cwd=tmp_path, workspace=workspace)
    assert result.returncode == 1
    table, below = result.stdout.split("┘\n", 1)
    assert "same error as Backward parity above" in table
    # Below the table, each distinct failure once, with its stage: the stub's is one.
    assert re.findall(r"^✘ ([A-Za-z ()0-9]+)$", below, flags=re.M) == ["Backward parity"]
    assert below.count("not written yet") == 1
    assert len(result.stdout.splitlines()) <= 40
    assert all(len(line) <= 80 for line in result.stdout.splitlines())


def test_advice_that_differs_only_by_run_is_noted_once(write_file):
    path = write_file(
        "extra.py",
        """
        import torch


        class MySigmoid(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                output = torch.sigmoid(x)
                ctx.save_for_backward(x, output)
                return output

            @staticmethod
            def backward(ctx, grad_output):
                x, output = ctx.saved_tensors
                return grad_output * output * (1 - output)
        """,
    )
    result = run_cli("check", "sigmoid", "--file", str(path))
    assert result.exit_code == 0, result.stdout
    assert result.stdout.count("note: forward saves") == 1
    assert re.search(r"\(and in \d+ other runs\)", result.stdout)


def test_a_non_utf8_file_shows_every_stage_as_a_syntax_error_does(write_file, tmp_path: Path):
    broken = write_file("syntax.py", "x = (\n")
    latin = tmp_path / "latin.py"
    latin.write_bytes("# café\nx = 1\n".encode("latin-1"))
    not_utf8 = json.loads(run_cli("check", "relu", "--file", str(latin), "--json").stdout)
    syntax = json.loads(run_cli("check", "relu", "--file", str(broken), "--json").stdout)
    assert [s["id"] for s in not_utf8["stages"]] == [s["id"] for s in syntax["stages"]]
    assert "is not UTF-8 text" in not_utf8["stages"][0]["message"]
    assert {s["verdict"] for s in not_utf8["stages"][1:]} == {"skip"}


# Narrow terminals


def test_the_solution_never_loses_a_character_at_60_columns(tmp_path: Path):
    source = (REPO / "solutions" / "layer_norm.py").read_text()
    result = trainer(
        "solution", "layer_norm", "--force", cwd=tmp_path, columns=60, workspace=tmp_path / "ws"
    )
    assert result.returncode == 0, result.stderr
    for line in source.splitlines():
        assert line.rstrip() in result.stdout, line


def test_list_is_one_line_per_exercise_under_its_track_at_80_columns(tmp_path: Path):
    result = trainer("list", cwd=tmp_path, workspace=tmp_path / "ws")
    lines = result.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines)
    for exercise in CATALOG.all:
        assert sum(bool(re.search(rf"\s{exercise.id}\s", line)) for line in lines) == 1
    # Each track's id (what `trainer next -t` takes) begins the line of its first exercise.
    tracks = [line.split()[0] for line in lines[1:] if not line.startswith(" ")]
    assert tracks[:-1] == [t for t in TRACKS if any(e.track == t for e in CATALOG.all)]
    assert len(lines) <= len(CATALOG.all) + 2  # the heading row and one summary line


# Watch mode


def test_watch_on_an_open_review_says_the_review_s_result_under_its_first_verdict(
    tmp_path: Path, terminal: list[Terminal]
):
    workspace = tmp_path / "ws"
    trainer("start", "sigmoid", cwd=tmp_path, workspace=workspace)
    with StateStore(workspace).update() as state:
        state.progress("sigmoid").passed = True  # an older version's pass: due at once
    assert "Review of sigmoid" in trainer("review", cwd=tmp_path, workspace=workspace).stdout
    watch = Terminal("watch", cwd=tmp_path, env={"TRAINER_WORKSPACE": str(workspace)})
    terminal.append(watch)
    shown = watch.wait_for(r"Watching for saves", timeout=120)
    screen = " ".join(plain(watch.output.rsplit("\x1b[2J", 1)[-1]).split())
    verdict = screen.index("stages failed")
    assert screen.index("Review of sigmoid failed: it comes back sooner.") > verdict, shown
    watch.type("q")
    assert watch.wait() == 0


def test_watch_clears_the_screen_per_verdict_names_its_keys_and_shows_the_next_statement_first(
    tmp_path: Path, terminal: list[Terminal]
):
    workspace = tmp_path / "ws"
    trainer("start", "sigmoid", cwd=tmp_path, workspace=workspace)
    watch = Terminal("watch", cwd=tmp_path, env={"TRAINER_WORKSPACE": str(workspace)})
    terminal.append(watch)
    shown = watch.wait_for(r"Watching for saves", timeout=120)
    assert "\x1b[2J" in watch.output
    assert "stuck? press h." in shown and "trainer hint" not in shown.split("Checking")[-1]
    cleared = watch.output.count("\x1b[2J")
    time.sleep(0.3)
    (workspace / "sigmoid.py").write_text((REPO / "solutions" / "sigmoid.py").read_text())
    before = len(plain(watch.output))
    shown = watch.wait_for(
        r"stages passed.*\n(The interviewer has a follow-up question.*\n)?.*Watching for saves",
        timeout=120,
        after=before,
    )
    assert "The interviewer has a follow-up question (1 left): trainer followup sigmoid" in shown
    assert watch.output.count("\x1b[2J") > cleared
    watch.type("h")
    shown = watch.wait_for(r"Press h for hint 2", after=before)
    watch.type("n")
    following = CATALOG.all[1] if CATALOG.all[0].id == "sigmoid" else CATALOG.all[0]
    after_next = len(plain(watch.output))
    shown = watch.wait_for(r"Watching for saves", after=after_next)
    screen = plain(watch.output.rsplit("\x1b[2J", 1)[-1])
    assert following.title.split()[0] in screen.split("\n")[1]  # the statement's box first
    assert "Checking" not in screen
    assert "Press h for one hint at a time" in screen
    watch.type("q")
    assert watch.wait() == 0
    assert "Stopped watching." in plain(watch.output)


# Small things


def test_help_texts_have_no_space_before_a_full_stop():
    for command in ["", "start", "check", "hint", "next", "watch", "reset", "validate", "grade"]:
        result = run_cli(*([command] if command else []), "--help")
        text = " ".join(result.stdout.replace("│", " ").split())
        stray = re.search(r".{0,30}[^\s.] \.(\s|$)", text)  # "progress ." but not "./path"
        assert stray is None, (command, stray)


def test_one_thing_is_one_thing_in_summaries(tmp_path: Path):
    mine = tmp_path / "mine"
    run_cli("new", "triple", "--root", str(mine))
    validated = run_cli(
        "--exercises-dir", str(mine), "validate", str(mine / "exercises" / "triple.yaml")
    )
    assert validated.exit_code == 0, validated.stdout
    assert "The spec holds." in validated.stdout
    started = run_cli("interview", "sigmoid", "--minutes", "1")
    assert "sigmoid: 1 minute." in started.stdout


def test_when_input_runs_out_mid_quiz_the_error_starts_its_own_line():
    result = CliRunner().invoke(app, ["quiz", "sigmoid", "--seed", "1"], input="1\n")
    assert result.exit_code == 2
    assert re.search(r"Your answer \(1-\d\): \nerror: the quiz stopped", result.output)


def test_quiz_choices_are_shuffled_by_seed_and_answers_follow_them():
    exercise = CATALOG.get("sigmoid")
    orders = {tuple(q.choices for q in shuffled(exercise.quiz, seed)) for seed in range(5)}
    assert len(orders) > 1
    questions = shuffled(exercise.quiz, 11)
    assert questions == shuffled(exercise.quiz, 11)
    for original, shown in zip(exercise.quiz, questions, strict=True):
        assert shown.choices[shown.answer - 1] == original.choices[original.answer - 1]
    reference = re.compile(r"[Cc]hoices? (\d)")
    for exercise_ in CATALOG.all:  # "Choice 2 is ..." names the same choice after the shuffle
        for original, shown in zip(exercise_.quiz, shuffled(exercise_.quiz, 5), strict=True):
            before = [int(m) for m in reference.findall(original.explanation)]
            after = [int(m) for m in reference.findall(shown.explanation)]
            assert [original.choices[n - 1] for n in before if n <= len(original.choices)] == [
                shown.choices[n - 1] for n in after if n <= len(shown.choices)
            ]
    first = questions[0]
    wrong = first.answer % len(first.choices) + 1
    result = run_cli("quiz", "sigmoid", "--seed", "11", input=f"{wrong}\n" + "1\n" * 10)
    assert f"The answer is {first.answer}. {first.choices[first.answer - 1]}" in result.stdout
    for number, choice in enumerate(first.choices, start=1):
        assert f"  {number}. {choice}" in result.stdout


def test_the_solution_confirmation_shows_y_slash_capital_n(
    tmp_path: Path, terminal: list[Terminal]
):
    asked = Terminal(
        "solution", "sigmoid", cwd=tmp_path, env={"TRAINER_WORKSPACE": str(tmp_path / "ws")}
    )
    terminal.append(asked)
    shown = asked.wait_for(r"See the solution anyway\? \[y/N\]")
    asked.type("\n")
    assert asked.wait() == 0
    assert "Good call" in plain(asked.output)
    assert "class MySigmoid" not in shown


@pytest.mark.parametrize("content", ["", "\n", "  \n\t\n"], ids=["empty", "newline", "blanks"])
def test_an_empty_file_is_a_failing_check_with_a_report(write_file, content):
    """Not a usage error: a class's empty submission scores 0 like any other failure."""
    empty = write_file("empty.py", content)
    result = run_cli("check", "sigmoid", "--file", str(empty), "--json")
    assert result.exit_code == 1, result.stdout + result.stderr
    report = result.json()
    assert report["passed"] is False
    load = report["stages"][0]
    assert load["id"] == "load" and load["verdict"] == "fail"
    assert "empty.py is empty" in load["message"]


def test_a_seed_out_of_range_is_a_usage_error_naming_seed():
    result = run_cli("check", "sigmoid", "--seed", "99999999999999999999")
    assert result.exit_code == 2
    assert "--seed" in result.stderr
    assert "spec" not in result.stderr


def test_the_time_up_title_stays_on_one_line_in_a_narrow_terminal(tmp_path: Path):
    workspace = tmp_path / "ws"
    trainer("interview", "linear", "--minutes", "1", cwd=tmp_path, workspace=workspace)
    state_file = workspace / ".trainer-state.json"
    state = json.loads(state_file.read_text())
    state["interview"]["started_at"] -= 120
    state_file.write_text(json.dumps(state))
    result = trainer("list", cwd=tmp_path, columns=40, workspace=workspace)
    assert "Interview on linear: time up" in result.stdout.splitlines()


def test_help_groups_learner_and_author_commands_in_two_panels():
    text = run_cli("--help").stdout
    learn, author = text.index("─ Learn "), text.index("─ Author and teach ")
    for command in ("start", "check", "hint", "list", "watch", "open", "plan", "review", "stats"):
        assert learn < text.index(f"│ {command} ") < author
    for command in ("validate", "new", "grade"):
        assert text.index(f"│ {command} ") > author


# README


def _readme() -> str:
    return (REPO / "README.md").read_text()


def test_the_readme_command_table_names_every_option_of_every_command():
    import click
    import typer

    from trainer.cli import COMMAND_MODULES, command_of

    rows = {
        m.group(1): m.group(0)
        for m in re.finditer(r"^\| `trainer ([a-z-]+)[^`]*` \|.*$", _readme(), flags=re.M)
    }
    shared = {"--workspace", "-w", "--exercises-dir", "--help"}
    for name, module in COMMAND_MODULES.items():
        command = command_of(module)
        assert name in rows, name
        for param in command.params:
            if isinstance(param, click.Option):
                for option in param.opts:
                    if option not in shared:
                        assert option in rows[name], (name, option)
    usage = _readme()[_readme().index("Every command also takes") :]
    assert "-w/--workspace" in usage and "--exercises-dir" in usage
    assert typer  # the options are typer's, read through click


def test_the_readme_sessions_are_captured_at_80_columns():
    section = _readme()[_readme().index("### A session, as captured") :]
    section = section[: section.index("## What a check does")]
    blocks = re.findall(r"```text\n(.*?)```", section, flags=re.S)
    assert len(blocks) >= 3
    for line in "".join(blocks).splitlines():
        assert len(line) <= 80, line


def test_new_prints_the_one_exercise_validate_command_the_readme_gives(tmp_path: Path):
    result = run_cli("new", "my_op", "--root", "my-exercises")
    command = "trainer --exercises-dir my-exercises validate my-exercises/exercises/my_op.yaml"
    assert command in " ".join(result.stdout.split())
    assert command in _readme()


def test_the_readme_gives_the_exit_codes_of_grade():
    row = next(line for line in _readme().splitlines() if line.startswith("| `trainer grade"))
    assert "Exit 0 when grading completed" in row and "2 when" in row


PRINTS = """\
import torch


class MySigmoid(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.sigmoid(x)
        ctx.save_for_backward(y)
        print("forward sees", tuple(x.shape))
        return y

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        return grad_output * y * {tail}
"""


def test_a_failing_check_shows_what_the_code_printed_for_the_first_failing_case(tmp_path):
    from tests.conftest import run_cli

    path = tmp_path / "sigmoid.py"
    path.write_text(PRINTS.format(tail="2"), encoding="utf-8")  # wrong: forgets (1 - y)
    result = run_cli("check", "sigmoid", "--file", str(path), "--no-plot")
    assert result.exit_code == 1
    assert "your code printed for x: (7,) in float32" in result.stdout
    assert "forward sees (7,)" in result.stdout
    assert "lines printed in all: trainer check --show-output shows them" in result.stdout


def test_a_passing_check_says_its_output_was_hidden_and_show_output_shows_it(tmp_path):
    from tests.conftest import run_cli

    path = tmp_path / "sigmoid.py"
    path.write_text(PRINTS.format(tail="(1 - y)"), encoding="utf-8")
    quiet = run_cli("check", "sigmoid", "--file", str(path), "--no-plot")
    assert quiet.exit_code == 0
    assert "forward sees" not in quiet.stdout
    assert "hidden on a pass" in quiet.stdout
    shown = run_cli("check", "sigmoid", "--file", str(path), "--no-plot", "--show-output")
    assert shown.exit_code == 0
    assert "forward sees (7,)" in shown.stdout
