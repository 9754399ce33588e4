"""Issue 33, "Learner experience, round three": each point through the real CLI, in a
pseudo-terminal where the point is about what a terminal shows."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.terminal import Terminal, plain


def trainer(
    *args: str, cwd: Path, columns: int = 80, workspace: Path | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    """``python -m trainer ARGS``, piped, as in a script."""
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
def terminals() -> Iterator[list[Terminal]]:
    opened: list[Terminal] = []
    yield opened
    for each in opened:
        each.close()


def screen(
    terminals: list[Terminal], *args: str, cwd: Path, workspace: Path, columns: int = 80
) -> tuple[int, str]:
    """Run ``trainer ARGS`` in a terminal ``columns`` wide; its exit code and what it showed."""
    shown = Terminal(
        *args, cwd=cwd, env={"TRAINER_WORKSPACE": str(workspace)}, columns=columns, rows=40
    )
    terminals.append(shown)
    code = shown.wait(timeout=180)
    return code, plain(shown.output).replace("\r\n", "\n")


# 4. Ctrl-C in watch


def test_ctrl_c_in_watch_exits_130_without_a_library_log_line(
    tmp_path: Path, terminals: list[Terminal]
):
    workspace = tmp_path / "ws"
    trainer("start", "sigmoid", cwd=tmp_path, workspace=workspace)
    watch = Terminal("watch", cwd=tmp_path, env={"TRAINER_WORKSPACE": str(workspace)})
    terminals.append(watch)
    watch.wait_for(r"Watching for saves", timeout=120)
    # Ctrl-C: the terminal sends SIGINT to its foreground process group (the test's
    # terminal is no controlling terminal, so the test sends it as the terminal would).
    os.killpg(watch.process.pid, signal.SIGINT)
    code = watch.wait()
    shown = plain(watch.output)
    assert code == 130, shown[-2000:]
    assert "KeyboardInterrupt" not in shown
    assert "Stopped watching." in shown
    assert watch.left_changed() == []


# 1. validate at 80 and 60 columns


def _broken_spec(folder: Path) -> Path:
    """A new exercise whose reference does not parse: validate fails it without a check."""
    assert trainer("new", "triple", "--root", "mine", cwd=folder).returncode == 0
    spec = folder / "mine" / "exercises" / "triple.yaml"
    spec.write_text(spec.read_text().replace("reference: 3 * x\n", "reference: 3 * x +\n"))
    return spec


@pytest.mark.parametrize("columns", [80, 60])
def test_validate_shows_every_word_of_every_problem_at_80_and_60_columns(
    columns: int, tmp_path: Path, terminals: list[Terminal]
):
    _broken_spec(tmp_path)
    code, shown = screen(
        terminals,
        *("--exercises-dir", "mine", "validate", "mine/exercises/triple.yaml"),
        cwd=tmp_path,
        workspace=tmp_path / "ws",
        columns=columns,
    )
    assert code == 1, shown
    words = " ".join(shown.split())
    assert "reference: is not a valid Python expression: invalid syntax" in words, shown
    assert "…" not in shown, shown
    for header in ("Schema", "Stub", "Solution", "Wrong", "Content"):
        assert header in shown, shown
    assert all(len(line.rstrip()) <= columns for line in shown.splitlines())


def test_validate_lists_long_variant_problems_one_per_line_in_full_at_60_columns():
    from trainer import console
    from trainer.authoring import Validation, VariantResult
    from trainer.spec import WrongVariant

    variant = WrongVariant("forgets_grad_output.py", "backward", "why", "no_grad_output")
    result = Validation(spec="exercises/batch_norm.yaml", exercise_id="batch_norm")
    result.variants = [VariantResult(variant, "forward", None)]
    result.solution = "the reference solution fails at backward: grad for `x` is wrong at 3 of 7"
    with console.captured(width=60) as shown:
        console.validation_table([result])
    text = shown.getvalue()
    words = " ".join(text.split())
    assert "forgets_grad_output.py: expected backward/no_grad_output, got forward" in words
    assert "the reference solution fails at backward: grad for `x` is wrong at 3 of 7" in words
    assert "…" not in text


# 3. An interview on a passed exercise


def test_an_interview_on_a_passed_exercise_runs_in_its_own_file_and_reports_only_itself(
    tmp_path: Path,
):
    from tests.conftest import run_cli

    workspace = tmp_path / "ws"
    assert run_cli("start", "sigmoid").exit_code == 0
    solved = (REPO / "solutions" / "sigmoid.py").read_text()
    (workspace / "sigmoid.py").write_text(solved)
    assert run_cli("check", "sigmoid").exit_code == 0
    answers = "1\n" * 3
    run_cli("quiz", "sigmoid", "--seed", "1", input=answers)  # an old quiz score

    started = run_cli("interview", "sigmoid", "--minutes", "30")
    assert started.exit_code == 0
    own = workspace / "interview" / "sigmoid.py"
    assert "interview/sigmoid.py" in " ".join(started.stdout.split())
    assert (workspace / "sigmoid.py").read_text() == solved  # the solved file is left alone
    assert "NotImplementedError" in own.read_text()  # the interview starts from the stub
    assert not (workspace / ".backups").exists()
    assert "passed" in run_cli("list").stdout.split("sigmoid", 1)[1].splitlines()[0]
    failing = run_cli("check")  # checks the interview's file, not the solved one
    assert failing.exit_code == 1
    assert "Interview:" in failing.stdout

    stopped = run_cli("interview", "--stop")
    assert "Interview on sigmoid: stopped" in stopped.stdout
    assert "Quiz" not in stopped.stdout  # the old score is not this interview's
    assert "Checks run" in stopped.stdout
    assert run_cli("check", "sigmoid").exit_code == 0  # after it, the solved file again


# 2. check --show-output


NOISY = """\
import torch

print("printed at import: the first line")


class MySigmoid(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.sigmoid(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        for i in range(3):
            print(f"backward line {i} " + "x" * 40)
        return y * (1 - y)
"""


def test_show_output_shows_from_the_first_line_says_how_much_and_keeps_all_of_it_in_a_file(
    tmp_path: Path, terminals: list[Terminal]
):
    workspace = tmp_path / "ws"
    trainer("start", "sigmoid", cwd=tmp_path, workspace=workspace)
    (tmp_path / "noisy.py").write_text(NOISY)
    code, shown = screen(
        terminals,
        *("check", "--file", "noisy.py", "--show-output", "--no-plot"),
        cwd=tmp_path,
        workspace=workspace,
    )
    assert code == 1, shown
    kept = workspace / ".output" / "sigmoid.txt"
    lines = kept.read_text().splitlines()
    assert lines[0] == "printed at import: the first line"  # import-time output, first
    assert len(lines) > 1000 and all(line.startswith("backward line") for line in lines[1:])
    words = " ".join(shown.split())
    assert "printed at import: the first line" in shown  # from the first line on screen too
    assert f"your code printed {len(lines)} lines (" in words  # how much there was
    assert f"All {len(lines)} lines are in ws/.output/sigmoid.txt" in words
    assert "not shown here" in words  # and where the screen leaves some out, it says so


def test_the_output_file_gets_every_byte_in_order_while_memory_keeps_only_tails():
    import io

    from trainer.checking.runner import OUTPUT_LINE_LIMIT, OUTPUT_TAIL, _Collected

    spill = io.BytesIO()
    collected = _Collected(spill=spill)
    collected.add_output(b"at import\n")
    for _ in range(40):  # 2.5 MiB without a newline
        collected.add_output(b"x" * 65536)
    collected.add_output(b"\nlast\n")
    collected.finish_output()

    assert spill.getvalue() == b"at import\n" + b"x" * 40 * 65536 + b"\nlast\n"
    assert len(collected._partial) <= OUTPUT_LINE_LIMIT
    assert len(collected.output) <= 4 * OUTPUT_TAIL + 1


# 7. A broken spec in a remembered folder


def test_list_shows_what_loads_and_names_a_broken_remembered_spec_once_from_here(
    tmp_path: Path, terminals: list[Terminal]
):
    workspace = tmp_path / "ws"
    assert trainer("new", "triple", "--root", "mine", cwd=tmp_path).returncode == 0
    remembered = trainer(
        "--exercises-dir", "mine", "start", "triple", cwd=tmp_path, workspace=workspace
    )
    assert remembered.returncode == 0, remembered.stderr
    spec = tmp_path / "mine" / "exercises" / "triple.yaml"
    spec.write_text(spec.read_text().replace("difficulty: easy", "difficulty: trivial"))
    code, shown = screen(terminals, "list", cwd=tmp_path, workspace=workspace)
    assert code == 0, shown
    assert "sigmoid" in shown and "linear" in shown  # the bundled exercises are listed
    words = " ".join(shown.split())
    assert words.count("mine/exercises/triple.yaml: difficulty:") == 1, shown


# 8. Smaller things


def test_help_puts_plot_in_the_learn_panel_on_one_line_and_has_no_unnamed_panel(
    tmp_path: Path, terminals: list[Terminal]
):
    code, shown = screen(terminals, "--help", cwd=tmp_path, workspace=tmp_path / "ws")
    assert code == 0
    assert "─ Commands " not in shown, shown
    learn, author = shown.index("─ Learn "), shown.index("─ Author and teach ")
    assert learn < shown.index("│ plot ") < author
    plot_row = shown[shown.index("│ plot ") :].splitlines()[0]
    assert "a map of wrong elements" in plot_row or not plot_row.rstrip(" │").endswith("for an")
    assert "for an\n" not in shown.replace("│", "").replace(" \n", "\n")


def test_an_unknown_exercise_is_suggested_a_close_id_only():
    from tests.conftest import run_cli

    far = run_cli("start", "nope")
    assert far.exit_code == 2
    assert "Did you mean" not in far.stderr  # "nope" is nothing like `topk`
    near = run_cli("start", "batch_nrm")
    assert "Did you mean `batch_norm`?" in near.stderr


def test_a_failed_check_ends_with_its_summary_line_under_the_picture(
    tmp_path: Path, terminals: list[Terminal]
):
    workspace = tmp_path / "ws"
    trainer("start", "sigmoid", cwd=tmp_path, workspace=workspace)
    good = (REPO / "solutions" / "sigmoid.py").read_text()
    wrong = good.replace("grad_output * output * (1 - output)", "output * (1 - output)")
    assert wrong != good
    (workspace / "sigmoid.py").write_text(wrong)
    code, shown = screen(terminals, "check", "--plot", cwd=tmp_path, workspace=workspace)
    assert code == 1, shown
    picture = shown.index("Slope of your gradient")
    summary = shown.rindex("stages failed")
    assert picture < summary, shown
    assert "stuck? trainer hint sigmoid." in " ".join(shown[summary:].split()), shown


# 5. Wrapped on words, prose reflowed


def _wrapped_once(lines: list[str], width: int) -> list[tuple[str, str]]:
    """Pairs of lines of one paragraph where the next line's first word would have fit
    on the line before: a break the text had before it was wrapped at ``width``."""
    early = []
    for line, following in itertools.pairwise(lines):
        words = following.split()
        new_item = not words or words[0].startswith(("-", "•"))
        if line.strip() and not new_item and len(line.rstrip()) + 1 + len(words[0]) <= width:
            early.append((line, following))
    return early


def test_an_error_wraps_on_words_at_80_columns(tmp_path: Path, terminals: list[Terminal]):
    code, shown = screen(terminals, "start", "batch_nrm", cwd=tmp_path, workspace=tmp_path / "ws")
    assert code == 2
    lines = [line for line in shown.splitlines() if line.strip()]
    assert all(len(line) <= 80 for line in lines), shown
    assert any("`batch_norm`?" in line for line in lines), shown  # never "`ba" / "tch_norm`"
    assert len(lines) > 1


def test_what_to_notice_is_reflowed_at_60_columns(tmp_path: Path, terminals: list[Terminal]):
    code, shown = screen(
        terminals,
        "solution",
        "batch_norm",
        "--force",
        cwd=tmp_path,
        workspace=tmp_path / "ws",
        columns=60,
    )
    assert code == 0, shown
    box = shown[shown.index("What to notice") :].splitlines()[1:]
    inner = [line.strip("│").strip() for line in box if line.startswith("│")]
    assert len(inner) > 5
    assert _wrapped_once(inner, 56) == []  # no break kept from the spec's 80-column lines


@pytest.mark.parametrize("exercise_id", ["dot_jvp", "exp_inplace"])
def test_a_stub_statement_is_wrapped_once(exercise_id: str):
    from tests.conftest import CATALOG
    from trainer.workspace import HEADER_WIDTH, scratch_text

    header = scratch_text(CATALOG.get(exercise_id)).split("\n\n")[0].split("\n#\n")
    for paragraph in header:
        lines = [line.removeprefix("#").removeprefix(" ") for line in paragraph.splitlines()]
        assert _wrapped_once(lines, HEADER_WIDTH - 2) == [], paragraph


def test_a_stub_written_by_an_earlier_trainer_still_counts_as_untouched(tmp_path: Path):
    from tests.conftest import CATALOG
    from trainer.workspace import Workspace, scratch_text

    exercise = CATALOG.get("dot_jvp")
    workspace = Workspace(tmp_path / "ws")
    workspace.ensure()
    workspace.scratch_path("dot_jvp").write_text(scratch_text(exercise, reflowed=False))
    result = workspace.start(exercise)
    assert not result.kept_edits  # replaced by today's stub without a backup


# 6. Every schema error of a spec at once


def test_validate_names_every_schema_error_at_once_typos_with_a_did_you_mean(
    tmp_path: Path, terminals: list[Terminal]
):
    assert trainer("new", "triple", "--root", "mine", cwd=tmp_path).returncode == 0
    spec = tmp_path / "mine" / "exercises" / "triple.yaml"
    text = spec.read_text().replace("reference: 3 * x\n", "refrence: 3 * x\n")
    spec.write_text(text.replace("    answer: 3\n", "    answer: 7\n"))
    code, shown = screen(
        terminals,
        *("--exercises-dir", "mine", "validate", "mine/exercises/triple.yaml"),
        cwd=tmp_path,
        workspace=tmp_path / "ws",
    )
    assert code == 1, shown
    words = " ".join(shown.split())
    assert words.count("refrence: is not a known field; did you mean `reference`?") == 1, shown
    assert "reference: is required but missing" not in words  # the typo is the one problem
    assert words.count("quiz[1].answer: 7 is out of range (3 choices; answers count from 1)") == 1


def test_a_reference_that_cannot_run_is_one_problem_and_a_missing_variant_names_its_path(
    tmp_path: Path,
):
    from trainer.authoring import COULD_NOT_RUN, Validation, VariantResult
    from trainer.spec import WrongVariant

    broken = f"{COULD_NOT_RUN}exercises/triple.yaml: preparing the check failed: no tripple"
    result = Validation(spec="exercises/triple.yaml", stub=broken, solution=broken, not_run=True)
    declared = WrongVariant("forgets.py", "backward", "why", "no_grad_output")
    missing = WrongVariant("missing.py", "backward", "why")
    path = tmp_path / "solutions" / "wrong" / "triple" / "missing.py"
    result.variants = [
        VariantResult(declared, "error", None),  # a knock-on of the reference
        VariantResult(missing, "missing file", None, path),
    ]
    assert result.problems == [
        broken,
        "missing.py: no such file: solutions/wrong/triple/missing.py (wrong_variants)",
    ]


def test_list_fits_a_40_row_screen_names_the_track_ids_and_shows_a_seen_solution(
    tmp_path: Path, terminals: list[Terminal]
):
    from tests.conftest import CATALOG, run_cli
    from trainer.spec import TRACKS

    workspace = tmp_path / "ws"
    run_cli("start", "sigmoid")
    run_cli("solution", "relu", "--force")
    code, shown = screen(terminals, "list", cwd=tmp_path, workspace=workspace)
    assert code == 0
    lines = shown.rstrip("\n").splitlines()
    assert len(lines) <= 39, shown  # and the shell's prompt on the 40th row
    assert all(len(line) <= 80 for line in lines)
    for track in ("linalg_indexing", "conv_pool"):  # what `trainer next -t` takes
        assert any(line.startswith(track + " ") for line in lines), shown
    assert sum(line.split()[0] in TRACKS for line in lines[1:] if line.strip()) == len(
        {e.track for e in CATALOG.all}
    )
    # What is shown for an exercise: the words after its id, up to the next exercise's.
    tokens = " ".join(lines[1:]).split()
    ids = {e.id for e in CATALOG.all} | set(TRACKS)

    def shown_for(exercise_id: str) -> list[str]:
        start = next(i for i, t in enumerate(tokens) if t.lstrip("→") == exercise_id) + 1
        end = next(
            (i for i in range(start, len(tokens)) if tokens[i].lstrip("→") in ids), len(tokens)
        )
        return tokens[start:end]

    assert "seen" in shown_for("relu")  # the solution was looked at
    assert "seen" not in shown_for("sigmoid")
    assert any(t == "→sigmoid" or t == "→" for t in tokens)  # the current exercise


# 9. Times stated with the load they were measured under


def test_the_readme_states_test_and_validate_times_with_the_machines_load():
    readme = (REPO / "README.md").read_text()
    development = readme[readme.index("## Development") :]
    figures = development[: development.index("pytest-xdist")]
    assert "load average" in figures and "make test" in figures
    assert "trainer validate" in figures
    adding = readme[readme.index("## Adding an exercise") : readme.index("## Development")]
    assert "load average" in adding  # beside the whole catalogue's validate time
