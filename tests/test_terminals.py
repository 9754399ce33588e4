"""Every command that draws, run in a real pseudo-terminal (issue 28).

A pipe takes other code paths than a terminal (rich draws progress bars and live
displays only on a terminal; prompts read from one): `trainer grade` and `trainer
validate` crashed typed at a shell and passed every piped test. Each command here
runs under a pty at 80 and 60 columns, with and without NO_COLOR; a run fails when
the command crashes, ends with another exit code, or leaves the terminal changed
(the cursor hidden, the alternate screen on, raw mode or no echo).

The commands that start a checking server (a torch import, ~2 s of CPU each) run
at two of the four: 80 columns in colour and 60 columns with NO_COLOR.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import CATALOG, REPO, run_cli
from tests.terminal import Terminal, plain
from trainer.checking.report import CheckReport, StageResult, Verdict
from trainer.gradebook import Gradebook, grade_of

GOOD = (REPO / "solutions" / "sigmoid.py").read_text()
WRONG = GOOD.replace("grad_output * output * (1 - output)", "output * (1 - output)")


def _class(folder: Path) -> None:
    (folder / "subs").mkdir()
    (folder / "subs" / "alice.py").write_text(GOOD)
    (folder / "subs" / "bob.py").write_text(WRONG)


def _gradebook(folder: Path) -> None:
    exercise = CATALOG.get("sigmoid")
    stages = [StageResult(s, Verdict.PASS, "ok") for s in exercise.stage_weights()]
    report = CheckReport("sigmoid", "alice.py", "0" * 64, 0, stages)
    book = Gradebook("sigmoid", "full", None, 1, [grade_of(exercise, "alice.py", 0, report)])
    (folder / "book.json").write_text(json.dumps(book.to_dict()))


def _new_exercise(folder: Path) -> None:
    assert run_cli("new", "triple", "--root", str(folder / "mine")).exit_code == 0


def _interview(folder: Path) -> None:
    assert run_cli("interview", "linear", "--minutes", "5").exit_code == 0


def _study_record(folder: Path) -> None:
    from trainer.interview import record_check
    from trainer.state import StateStore

    store = StateStore(folder / "ws")
    record_check(store, "sigmoid", False, "no_grad_output")
    record_check(store, "sigmoid", True, None)


def _passed_long_ago(folder: Path) -> None:
    from trainer.state import StateStore

    with StateStore(folder / "ws").update() as state:
        state.progress("sigmoid").passed = True  # an older version's pass: due at once


def _follow_up_passed(folder: Path) -> None:
    from trainer.state import StateStore

    with StateStore(folder / "ws").update() as state:
        state.current = "softmax"
        progress = state.progress("softmax")
        progress.passed = True
        progress.follow_ups_passed = ["no_jacobian"]


def _interview_on_softmax_solved(folder: Path) -> None:
    assert run_cli("interview", "softmax", "--minutes", "30").exit_code == 0
    right = (REPO / "solutions" / "softmax.py").read_text()
    (folder / "ws" / "interview" / "softmax.py").write_text(right)


def _interview_follow_up_asked(folder: Path) -> None:
    from trainer.interview import record_check
    from trainer.state import StateStore

    assert run_cli("interview", "softmax", "--minutes", "30").exit_code == 0
    record_check(StateStore(folder / "ws"), "softmax", True, follow_ups=("no_jacobian",))


def _quiz_keys() -> tuple[tuple[str, str], ...]:
    return ((r"Your answer \(1-\d\): ", "1\n"),) * len(CATALOG.get("sigmoid").quiz)


@dataclass(frozen=True)
class Case:
    args: tuple[str, ...]
    shows: str  # a regex the screen shows once the command is done
    keys: tuple[tuple[str, str], ...] = ()  # (what to wait for, what to type then)
    exit_code: int = 0
    torch: bool = False  # starts a checking server
    prepare: Callable[[Path], None] | None = None
    rows: int = 40
    wide: str | None = None  # a regex the screen shows too at 80 columns


CASES = {
    "help": Case(("--help",), r"Usage: .*trainer"),
    "list": Case(("list",), r"→ sigmoid"),
    "list-follow-ups": Case(("list",), r"→ softmax ✔ 1/2", prepare=_follow_up_passed),
    "list-tall-follow-ups": Case(
        ("list",),
        r"→ softmax\s+hard\s+passed",
        prepare=_follow_up_passed,
        rows=60,
        wide=r"F-ups .* → softmax\s+hard\s+passed\s+0/3\s+–\s+–\s+1/2 ",
    ),
    "start": Case(("start", "relu"), r"Next steps"),
    "next": Case(("next",), r"Next steps"),
    "hint": Case(("hint", "sigmoid"), r"Hint 1 of \d"),
    "followup": Case(("followup", "sigmoid"), r"Follow-up 1 of \d: save_output_only.*check"),
    "followup-list": Case(("followup", "softmax", "--list"), r"1\. no_jacobian.*2\. fast"),
    "plan": Case(("plan",), r"Today, day 1 of 14"),
    "review": Case(("review",), r"Review of sigmoid.*Next steps", prepare=_passed_long_ago),
    "stats": Case(("stats",), r"Checks per day.*Weak spots", prepare=_study_record),
    "quiz": Case(("quiz", "sigmoid", "--seed", "1"), r"Score: \d+ of \d+", keys=_quiz_keys()),
    "solution": Case(("solution", "sigmoid"), r"Good call", keys=((r"\[y/N\]", "\n"),)),
    "explain": Case(
        ("explain",), r"How the gradient is derived: sigmoid.*Where learners", prepare=_study_record
    ),
    "explain-early": Case(("explain", "relu"), r"Good call", keys=((r"\[y/N\]", "\n"),)),
    "reset": Case(("reset", "--all"), r"Nothing was reset", keys=((r"\[y/N\]", "n\n"),)),
    "interview": Case(("interview", "relu", "--minutes", "5"), r"Interview started"),
    "interview-stop": Case(("interview", "--stop"), r"Hints used", prepare=_interview),
    "interview-follow-ups": Case(
        ("interview", "softmax", "--minutes", "5"), r"After the pass the interviewer asks"
    ),
    "interview-stop-follow-up": Case(
        ("interview", "--stop"),
        r"Interview on softmax: passed.*Follow-up .*no_jacobian: not answered \(stopped",
        prepare=_interview_follow_up_asked,
    ),
    "new": Case(("new", "quadruple", "--root", "more"), r"validate this exercise"),
    "classroom-init": Case(("classroom", "init", "sigmoid", "--dir", "."), r"points? in all"),
    "wheel": Case(("wheel", "--dir", "dist"), r"Install it with: pip install"),
    "grade-merge": Case(
        ("grade-merge", "book.json"), r"1 of 1 submissions passed", prepare=_gradebook
    ),
    "derive": Case(
        ("derive", "sigmoid"),
        r"1 of 1 right",
        keys=((r"dL/dx = ", "g*y(1-y)\n"), (r"dL/dx = ", "g * y * (1 - y)\n")),
        torch=True,
    ),
    "check": Case(("check",), r"stages? failed", exit_code=1, torch=True),
    "check-interview-follow-up": Case(
        ("check",),
        r"The interviewer asks a follow-up.*Follow-up 1 of 2: no_jacobian.*Change your file",
        torch=True,
        prepare=_interview_on_softmax_solved,
    ),
    "plot": Case(("plot",), r"Slope of your gradient", torch=True),
    "watch": Case(
        ("watch",), r"Stopped watching", keys=((r"Watching for saves", "q"),), torch=True
    ),
    "grade": Case(
        ("grade", "sigmoid", "subs", "--unprotected"),
        r"1 of 2 submissions passed",
        torch=True,
        prepare=_class,
    ),
    "validate": Case(
        ("--exercises-dir", "mine", "validate", "mine/exercises/triple.yaml"),
        r"The spec holds",
        torch=True,
        prepare=_new_exercise,
    ),
}

TERMINALS = [(80, False), (60, True), (80, True), (60, False)]


def _runs() -> list[object]:
    runs: list[object] = []
    for name, case in CASES.items():
        for columns, no_color in TERMINALS[: 2 if case.torch else 4]:
            colour = "no-color" if no_color else "colour"
            runs.append(pytest.param(case, columns, no_color, id=f"{name}-{columns}-{colour}"))
    return runs


@pytest.mark.parametrize(("case", "columns", "no_color"), _runs())
def test_a_command_that_draws_works_in_a_terminal_and_leaves_it_as_it_was(
    case: Case, columns: int, no_color: bool, tmp_path: Path, isolated_workspace: Path
):
    assert run_cli("start", "sigmoid").exit_code == 0
    (isolated_workspace / "sigmoid.py").write_text(WRONG)
    if case.prepare is not None:
        case.prepare(tmp_path)
    env = {"TRAINER_WORKSPACE": str(isolated_workspace)}
    if no_color:
        env["NO_COLOR"] = "1"
    terminal = Terminal(*case.args, cwd=tmp_path, env=env, columns=columns, rows=case.rows)
    try:
        typed_at = 0
        for pattern, keys in case.keys:
            terminal.wait_for(pattern, timeout=120, after=typed_at)
            typed_at = len(plain(terminal.output))
            terminal.type(keys)
        code = terminal.wait(timeout=120)
        shown = plain(terminal.output)
        for crash in ("Traceback", "lost sys.stderr", "object does not support"):
            assert crash not in shown, shown[-3000:]
        assert code == case.exit_code, shown[-3000:]
        assert re.search(case.shows, " ".join(shown.split())), shown[-3000:]
        if case.wide is not None and columns >= 80:
            assert re.search(case.wide, " ".join(shown.split())), shown[-3000:]
        assert terminal.left_changed() == [], shown[-3000:]
    finally:
        terminal.close()
