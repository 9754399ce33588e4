"""``%load_ext trainer``: the trainer's magics for Jupyter, Colab and IPython.

* ``%trainer list | stats | start EX | hint EX | quiz EX | solution EX | explain EX |
  followup EX | check EX`` mirror the CLI's commands and call the same core;
* ``%%trainer check EX [--define]`` makes the cell the exercise's scratch file
  (written atomically, the previous version backed up as ``reset`` does) and
  checks it in the isolated checker, on the kernel's warm checking server
  (:mod:`trainer.api`). The cell never runs in the kernel unless ``--define``
  asks for it, and then only after the verdict.

Imported by ``%load_ext trainer`` only: ``import trainer`` stays cheap.
"""

from __future__ import annotations

import argparse
import linecache
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, Protocol

from IPython.core.error import StdinNotImplementedError, UsageError

from trainer import notebook_view as view
from trainer.api import Report, check_cell, check_file
from trainer.checking.limits import DEFAULT_SEED, DEFAULT_TIMEOUT
from trainer.errors import TrainerError, WorkspaceError
from trainer.session import CheckOptions, Session
from trainer.spec import Exercise
from trainer.state import State

COMMANDS = ("list", "stats", "start", "hint", "quiz", "solution", "explain", "followup", "check")
USAGE_ADVICE = "See `%trainer --help`."
NO_INPUT = (
    "This notebook cannot ask for answers here (it runs without input, headless or in a "
    "script); the questions are shown above. Take the quiz where the notebook is interactive "
    "(Jupyter, Colab), or with `trainer quiz {id}` in a terminal. Nothing was saved."
)
NOT_PASSED = (
    "you have not passed `{id}` yet. Keep trying (`%trainer hint {id}` helps), "
    "or see it anyway with `%trainer solution {id} --force`."
)


class MagicUsageError(TrainerError):
    """The magic's line does not parse; the message ends with where help is."""


class _HelpShown(Exception):
    """``--help`` printed its text: nothing more to do."""


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of ending the kernel's process."""

    def error(self, message: str) -> NoReturn:
        raise MagicUsageError(f"{message}. {USAGE_ADVICE}")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if status:
            raise MagicUsageError(f"{(message or '').strip()}. {USAGE_ADVICE}")
        raise _HelpShown


@dataclass(frozen=True)
class Command:
    """One parsed ``%trainer`` line."""

    name: str
    exercise: str | None = None
    force: bool = False
    show_all: bool = False
    show_list: bool = False
    define: bool = False
    file: Path | None = None
    seed: int = DEFAULT_SEED
    timeout: float = DEFAULT_TIMEOUT
    double_backward: bool = False
    workspace: Path | None = None


def _parser() -> _Parser:
    parser = _Parser(
        prog="%trainer",
        description="The autograd trainer in a notebook. As a cell magic: "
        "%%trainer check EX [--define] checks the cell.",
    )
    common = _Parser(add_help=False)
    common.add_argument("-w", "--workspace", type=Path, help="folder for scratch files")
    commands = parser.add_subparsers(dest="name", required=True, parser_class=_Parser)
    commands.add_parser("list", parents=[common], help="exercises and your progress")
    commands.add_parser("stats", parents=[common], help="where you stand, weak spots, charts")
    start = commands.add_parser("start", parents=[common], help="statement and stub of EX")
    start.add_argument("exercise", metavar="EX")
    start.add_argument("--force", action="store_true", help="replace an edited scratch file")
    hint = commands.add_parser("hint", parents=[common], help="the next hint")
    hint.add_argument("exercise", metavar="EX", nargs="?")
    hint.add_argument("--all", dest="show_all", action="store_true", help="every hint")
    quiz = commands.add_parser("quiz", parents=[common], help="questions, asked with input()")
    quiz.add_argument("exercise", metavar="EX", nargs="?")
    solution = commands.add_parser("solution", parents=[common], help="the reference solution")
    solution.add_argument("exercise", metavar="EX", nargs="?")
    solution.add_argument("--force", action="store_true", help="before a pass too")
    explain = commands.add_parser(
        "explain", parents=[common], help="how the gradient is derived (after a pass)"
    )
    explain.add_argument("exercise", metavar="EX", nargs="?")
    explain.add_argument(
        "--force", action="store_true", help="before a pass too (every hint counts as seen)"
    )
    followup = commands.add_parser(
        "followup", parents=[common], help="the interviewer's next follow-up, taken up"
    )
    followup.add_argument("exercise", metavar="EX", nargs="?")
    followup.add_argument(
        "--list", dest="show_list", action="store_true", help="every follow-up, none taken up"
    )
    check = commands.add_parser(
        "check", parents=[common], help="check the cell (%%%%trainer) or the scratch file"
    )
    check.add_argument("exercise", metavar="EX", nargs="?")
    check.add_argument("--define", action="store_true", help="then run the cell in the kernel")
    check.add_argument("-f", "--file", type=Path, help="check this file (line magic)")
    check.add_argument("--seed", type=int, default=DEFAULT_SEED)
    check.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT)
    check.add_argument("--double-backward", action="store_true")
    return parser


def parse(line: str, *, cell: bool) -> Command:
    """Read a ``%trainer`` line; ``cell`` says it heads a cell (``%%trainer``)."""
    try:
        words = shlex.split(line)
    except ValueError as error:
        raise MagicUsageError(f"{error}. {USAGE_ADVICE}") from None
    if not words:
        words = ["--help"]
    options = vars(_parser().parse_args(words))
    command = Command(**options)
    if cell and command.name != "check":
        raise MagicUsageError(
            f"only `%%trainer check` takes a cell; `{command.name}` is a line magic: "
            f"`%trainer {command.name} ...` on a line of its own."
        )
    if cell and command.file is not None:
        raise MagicUsageError(
            "`%%trainer check` checks the cell; --file is for the line magic `%trainer check`."
        )
    if not cell and command.define:
        raise MagicUsageError(
            "--define runs the checked cell in the kernel: use it as `%%trainer check EX "
            "--define` on the first line of the cell."
        )
    if command.timeout < 1:
        raise MagicUsageError(f"--timeout must be at least 1 second. {USAGE_ADVICE}")
    return command


class Shell(Protocol):
    """What the magics use of IPython's shell."""

    user_ns: dict[str, Any]

    def set_next_input(self, s: str, replace: bool = False) -> None: ...


def _ipython_display(shown: object) -> None:
    from IPython.display import display

    show: Callable[[object], None] = display  # IPython's display() has no annotations
    show(shown)


def _input(prompt: str) -> str:
    return input(prompt)  # ipykernel puts its own input() in builtins while a cell runs


class TrainerMagics:
    """The ``%trainer`` line and cell magic of one shell."""

    def __init__(
        self,
        shell: Shell,
        display: Callable[[object], None] = _ipython_display,
        ask: Callable[[str], str] = _input,
    ) -> None:
        self.shell = shell
        self.display = display
        self.ask = ask
        self._defined = 0

    def trainer(self, line: str, cell: str | None = None) -> None:
        """The autograd trainer: %trainer list|stats|start|hint|quiz|solution|explain|followup|check EX;
        %%trainer check EX [--define] checks the cell. %trainer --help for more."""
        try:
            self.run(parse(line, cell=cell is not None), cell)
        except _HelpShown:
            return
        except TrainerError as problem:
            raise UsageError(problem.message) from None

    def run(self, command: Command, cell: str | None = None) -> Report | None:
        """Do what ``command`` says and show it; a check's report is also returned."""
        session = Session(command.workspace, command="%trainer")
        self._notices(session)
        if session.interview_ended is not None:
            self._show(view.interview_summary(session.interview_ended))
        if command.name == "list":
            state = session.store.load() if session.workspace.root.is_dir() else State()
            self._notices(session)
            self._show(view.exercise_list(session.catalog.all, state))
            return None
        if command.name == "stats":
            from trainer.stats import compute

            state = session.store.load() if session.workspace.root.is_dir() else State()
            self._notices(session)
            concepts = session.catalog.shared_quiz("concepts")
            for shown in view.stats(compute(state, session.catalog.all, concepts)):
                self.display(shown)
            return None
        exercise = session.exercise(command.exercise)
        if command.name == "start":
            self._start(session, exercise, command.force)
        elif command.name == "hint":
            self._hint(session, exercise, command.show_all)
        elif command.name == "quiz":
            self._quiz(session, exercise)
        elif command.name == "solution":
            self._solution(session, exercise, command.force)
        elif command.name == "explain":
            self._explain(session, exercise, command.force)
        elif command.name == "followup":
            self._followup(session, exercise, command.show_list)
        elif cell is not None:
            return self._check_cell(session, exercise, cell, command)
        else:
            return self._check_file(session, exercise, command)
        return None

    def _show(self, shown: view.Shown | Sequence[view.Shown]) -> None:
        for item in [shown] if isinstance(shown, view.Shown) else shown:
            self.display(item)

    def _notices(self, session: Session) -> None:
        for notice in session.take_notices():
            self._show(view.message(f"note: {notice}"))

    def _start(self, session: Session, exercise: Exercise, force: bool) -> None:
        result = session.start(exercise, force=force)
        self._notices(session)
        source = result.path.read_text(encoding="utf-8-sig").replace("\r\n", "\n")
        cell = f"%%trainer check {exercise.id}\n{source}"
        backup = _shown_path(result.backup) if result.backup is not None else None
        self._show(
            view.started(exercise, _shown_path(result.path), cell, result.kept_edits, backup)
        )
        self.shell.set_next_input(cell, replace=False)

    def _hint(self, session: Session, exercise: Exercise, show_all: bool) -> None:
        from trainer.hints import reveal_all_hints, reveal_next_hint

        session.workspace.ensure()
        if show_all:
            reveal_all_hints(exercise, session.store)
            self._notices(session)
            self._show(view.all_hints(exercise))
            return
        reveal = reveal_next_hint(exercise, session.store)
        self._notices(session)
        self._show(view.hint(exercise, reveal.number, reveal.text, reveal.last))

    def _quiz(self, session: Session, exercise: Exercise) -> None:
        from trainer.quiz import parse_choice, record_score
        from trainer.review import record_quiz_answers

        total = len(exercise.quiz)
        answers = []
        score = 0
        for number, question in enumerate(exercise.quiz, start=1):
            self._show(view.quiz_question(number, total, question))
            while True:
                try:
                    answer = self.ask(f"Your answer (1-{len(question.choices)}): ")
                except (StdinNotImplementedError, EOFError):
                    for later, rest in enumerate(exercise.quiz[number:], start=number + 1):
                        self._show(view.quiz_question(later, total, rest))
                    self._show(view.message(NO_INPUT.format(id=exercise.id)))
                    return
                choice = parse_choice(answer, question)
                if choice is not None:
                    break
                self._show(view.message(f"Please type a number from 1 to {len(question.choices)}."))
            correct = choice == question.answer
            score += correct
            answers.append((question, correct))
            self._show(view.quiz_feedback(question, correct))
        session.workspace.ensure()
        best = record_score(exercise, session.store, score)
        record_quiz_answers(session.store, exercise.id, answers, reviewing=False)
        self._notices(session)
        self._show(view.quiz_score(exercise, score, total, best))

    def _solution(self, session: Session, exercise: Exercise, force: bool) -> None:
        path = session.catalog.solution_path(exercise)
        if not path.is_file():
            raise TrainerError(f"no reference solution is bundled for `{exercise.id}` ({path}).")
        root = session.workspace.root
        passed = root.is_dir() and session.store.load().progress(exercise.id).passed
        if not passed and not force:
            try:
                answer = self.ask(
                    f"You have not passed {exercise.id} yet. See the solution anyway? [y/N] "
                )
            except (StdinNotImplementedError, EOFError):
                raise TrainerError(NOT_PASSED.format(id=exercise.id)) from None
            if answer.strip().lower() not in ("y", "yes"):
                self._show(view.message(f"Good call. `%trainer hint {exercise.id}` helps."))
                return
        if not passed:
            session.workspace.ensure()
            with session.store.update() as state:
                state.progress(exercise.id).solution_seen = True
        self._show(view.solution(exercise, path.read_text(encoding="utf-8"), passed))

    def _explain(self, session: Session, exercise: Exercise, force: bool) -> None:
        """The worked derivation, as `trainer explain`: after a pass, or before one when
        asked (`--force`, or yes at the prompt), which counts as every hint seen."""
        from trainer.explain import (
            DECLINED,
            EARLY_QUESTION,
            NotPassedYet,
            explanation,
            record_early_look,
        )

        try:
            shown = explanation(exercise, session.store, force=force, command="%trainer")
        except NotPassedYet as refused:
            try:
                answer = self.ask(f"{EARLY_QUESTION.format(id=exercise.id)} [y/N] ")
            except (StdinNotImplementedError, EOFError):
                raise refused from None
            if answer.strip().lower() not in ("y", "yes"):
                self._show(view.message(DECLINED.format(id=exercise.id, command="%trainer")))
                return
            shown = explanation(exercise, session.store, force=True, command="%trainer")
        if not shown.passed:
            record_early_look(session.writable_store(), exercise)
            self._notices(session)
        self._show(view.derivation(shown.exercise, shown.text, passed=shown.passed))

    def _followup(self, session: Session, exercise: Exercise, show_list: bool) -> None:
        """The interviewer's next follow-up, taken up, as `trainer followup`; `--list`:
        every one, passed or taken up."""
        from trainer.follow_ups import ask_next, status

        store = session.writable_store()
        if show_list:
            where = status(exercise, store.load().progress(exercise.id))
            self._notices(session)
            active = where.active.id if where.active is not None else None
            self._show(view.follow_up_list(exercise, where.passed, active))
            return
        asked = ask_next(store, exercise)
        self._notices(session)
        if asked.follow_up is None:
            self._show(view.no_follow_up(exercise, asked.passed))
            return
        self._show(view.follow_up_question(exercise, asked.follow_up, asked.number))

    def _check_cell(
        self, session: Session, exercise: Exercise, cell: str, command: Command
    ) -> Report:
        report, backup = check_cell(session, exercise, cell, _options(command))
        self._notices(session)
        if backup is not None:
            self._show(view.message(f"Your previous version was saved to `{_shown_path(backup)}`."))
        self._show_report(report, exercise)
        if command.define:
            self._define(cell)  # after the verdict: the cell's own errors come after it
        return report

    def _define(self, cell: str) -> None:
        """Run the checked cell in the kernel, so that its class can be used afterwards."""
        self._defined += 1
        filename = f"<trainer-check-{self._defined}>"
        linecache.cache[filename] = (len(cell), None, cell.splitlines(True), filename)
        exec(compile(cell, filename, "exec"), self.shell.user_ns)

    def _check_file(self, session: Session, exercise: Exercise, command: Command) -> Report:
        path = command.file or session.workspace.scratch_path(exercise.id)
        if not path.is_file():
            hint = (
                f" Run `%trainer start {exercise.id}` to create it."
                if command.file is None
                else " Check the path given to --file."
            )
            raise WorkspaceError(f"no file at {path}.{hint}")
        report = check_file(session, exercise, path, _options(command))
        self._notices(session)
        self._show_report(report, exercise)
        return report

    def _show_report(self, report: Report, exercise: Exercise) -> None:
        self.display(report)
        for picture in report.pictures():
            self.display(picture)
        if report.derivation is not None:  # the exercise's first pass
            self._show(view.derivation(report.exercise, report.derivation))
        asked = report.follow_up.asked if report.follow_up is not None else None
        if report.follow_up is not None and asked is not None:  # an interview goes on
            self._show(view.follow_up_question(exercise, asked, report.follow_up.asked_number))


def _options(command: Command) -> CheckOptions:
    return CheckOptions(
        seed=command.seed, timeout=command.timeout, double_backward=command.double_backward
    )


def _shown_path(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def load_ipython_extension(shell: Any) -> None:
    """Register ``%trainer`` and ``%%trainer`` on ``shell`` (called by ``%load_ext trainer``)."""
    magics = TrainerMagics(shell)
    shell.register_magic_function(magics.trainer, magic_kind="line_cell", magic_name="trainer")
