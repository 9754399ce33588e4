"""Everything the user sees: the only module that talks to rich.

rich is imported on first use, not at start: `trainer hint` prints a small box
of its own and never loads rich's console (about 10 ms of a 60 ms command).
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainer.bugs import BUG_WORDS, bug_message
from trainer.spec import Exercise, FollowUp, QuizQuestion, SharedQuiz, reflow
from trainer.state import Progress, State

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    from trainer.authoring import Validation
    from trainer.checking.report import CheckReport, ProtectionLevel, StageResult
    from trainer.explain import AfterCheck, Derivation
    from trainer.follow_ups import FollowUpCheck
    from trainer.gradebook import Gradebook
    from trainer.interview import InterviewSummary
    from trainer.review import Agenda, DueQuestion, ReviewStart
    from trainer.stats import Stats
    from trainer.study_plan import Schedule
    from trainer.workspace import StartResult


def _panel(*args: object, **kwargs: object) -> Panel:
    # rich.panel and rich.table cost milliseconds at start; most commands print neither.
    from rich.panel import Panel

    return Panel(*args, **kwargs)  # type: ignore[arg-type]


def _table(*args: object, **kwargs: object) -> Table:
    from rich.table import Table

    return Table(*args, **kwargs)  # type: ignore[arg-type]


class _LazyConsole:
    """A rich Console made on first use."""

    def __init__(self, stderr: bool) -> None:
        self._stderr = stderr
        self._console: Console | None = None

    def real(self) -> Console:
        """The Console itself, for what rich uses as one (a progress bar, a live display):
        this stand-in only forwards attributes, not ``with console:``, which rich's live
        displays enter on a terminal."""
        if self._console is None:
            from rich.console import Console

            self._console = Console(stderr=self._stderr, highlight=False)
        return self._console

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real(), name)


out: Any = _LazyConsole(stderr=False)
err: Any = _LazyConsole(stderr=True)


def prepare_to_draw() -> None:
    """Import and warm what drawing a check's report takes (rich's console, tables and
    text, its width tables): ~25 ms a command that checks code spends while its
    checking server imports torch, not after the verdict came."""
    from rich.console import Console

    table = _table("stage", "result")
    table.add_row(_text("✔ Load", "bold green"), _panel("a [bold]first[/bold] run"))
    Console(file=io.StringIO(), width=80).print(table)
    out.real()
    err.real()


@contextlib.contextmanager
def captured(width: int) -> Iterator[io.StringIO]:
    """What the block prints on stdout, as plain text ``width`` columns wide (for measuring)."""
    from rich.console import Console

    buffer = io.StringIO()
    saved = out._console
    out._console = Console(file=buffer, width=width, highlight=False, color_system=None)
    try:
        yield buffer
    finally:
        out._console = saved


def _text(text: str = "", style: str = "") -> Text:
    from rich.text import Text

    return Text(text, style=style)


_VERDICT_STYLE = {
    "pass": ("✔", "bold green"),
    "fail": ("✘", "bold red"),
    "skip": ("–", "dim"),
}


_INLINE = re.compile(r"`([^`]+)`|\*\*([^*]+)\*\*|\*([^*\s][^*]*)\*")
_BLOCK = re.compile(r"^\s*([-*+] |\d+\. |#|```|>|\|)", re.MULTILINE)


def markdown(text: str) -> RenderableType:
    """Markdown for the console. A single paragraph (a hint) is rendered here,
    without importing a Markdown parser: `hint` must start fast. Either way the
    paragraphs are reflowed to the terminal's width."""
    if _BLOCK.search(text) or "\n\n" in text.strip():
        from rich.markdown import Markdown

        return Markdown(text)
    text = reflow(text)
    rendered = _text()
    position = 0
    for match in _INLINE.finditer(text):
        rendered.append(text[position : match.start()])
        code, bold, italic = match.groups()
        if code is not None:
            rendered.append(code, style="bold cyan")
        elif bold is not None:
            rendered.append(bold, style="bold")
        else:
            rendered.append(italic, style="italic")
        position = match.end()
    rendered.append(text[position:])
    return rendered


def is_interactive() -> bool:
    return sys.stdin.isatty() and sys.stdout.isatty()


def error(message: str) -> None:
    # On a terminal, wrapped on words at its width; piped, one line, to grep and copy.
    err.print(_text("error: ", style="bold red") + _text(message), soft_wrap=not err.is_terminal)


def checker_bug(where: str, path: Path | str | None, error: str = "") -> None:
    """A bug of ours, on stderr: its words, where it happened, and its traceback's file."""
    err.print(
        _text("✘ ", style="bold magenta") + _text(bug_message(where, path, error)),
        soft_wrap=not err.is_terminal,
    )


def notice(message: str) -> None:
    err.print(_text("note: ", style="bold yellow") + _text(message), soft_wrap=not err.is_terminal)


def print_json(document: str) -> None:
    # Plain print: exactly one JSON document, no markup or wrapping.
    sys.stdout.write(document + "\n")


def _plain_relative(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _as_given(path: str) -> str:
    """A submission's path as found, relative when it can be, links not followed: a
    link's own name, not its target's."""
    with contextlib.suppress(ValueError):
        return str(Path(path).absolute().relative_to(Path.cwd()))
    return path


def _relative(path: Path) -> str:
    """A path for markup strings: relative when it can be, and escaped."""
    from rich.markup import escape

    return escape(_plain_relative(path))


def _link(path: Path) -> str:
    """:func:`_relative`, and a link the terminal can open (OSC 8 hyperlink).

    rich writes the link only to a terminal: piped output stays plain text.
    Terminals without OSC 8 show the text alone.
    """
    return f"[link={path.absolute().as_uri()}]{_relative(path)}[/link]"


def plural(count: float, word: str, many: str | None = None) -> str:
    """``1 spec``, ``2 specs``; ``1 minute``, ``1.5 minutes``."""
    return f"{count:g} {word if count == 1 else many or word + 's'}"


def started(exercise: Exercise, result: StartResult, watching: bool = False) -> None:
    """The statement and what to do next; in watch mode the steps name its keys."""
    statement(exercise)
    shown = _link(result.path)
    if result.kept_edits:
        out.print(
            f"[yellow]{shown} already has your edits; it was kept as it is.[/]\n"
            f"To start over: [bold]trainer start {exercise.id} --force[/] "
            "(your file is backed up first)."
        )
    elif result.backup is not None:
        out.print(f"Your previous file was saved to [bold]{_link(result.backup)}[/].")
        out.print(f"A fresh stub is in [bold]{shown}[/].")
    else:
        out.print(f"Your scratch file: [bold]{shown}[/]")
    if watching:
        steps = (
            "  2. Save it: every save is checked ([bold]c[/] checks now).\n"
            "  3. Stuck? Press [bold]h[/] for one hint at a time."
        )
    else:
        steps = (
            "  2. Run [bold]trainer check[/] to get a verdict.\n"
            "  3. Stuck? [bold]trainer hint[/] reveals one hint at a time."
        )
    out.print(
        "\n[bold]Next steps[/]\n"
        f"  1. Open it ([bold]trainer open[/]) and write [bold]backward()[/] in "
        f"`{exercise.class_name}`.\n" + steps
    )


def statement(exercise: Exercise) -> None:
    out.print(
        _panel(
            markdown(exercise.statement), title=_text(exercise.title, style="bold"), expand=False
        )
    )


def _distinct_notes(notes: Sequence[str]) -> list[str]:
    """Each piece of advice once: notes that differ only in numbers or in the run they
    name ("(for x: (4, 5) in float32)") are one note, with how many runs it came from."""
    groups: dict[str, list[str]] = {}
    for note in notes:
        unrun = re.sub(r" \(for [^()]*(\([^()]*\)[^()]*)*\)", "", note)
        key = re.sub(r"\d+(\.\d+)?( [kMG]?i?B\b)?", "#", unrun)  # "1.0 kB", "288 B", "3"
        groups.setdefault(key, []).append(note)
    shown = []
    for same in groups.values():
        extra = len(same) - 1
        shown.append(same[0] + (f" (and in {plural(extra, 'other run')})" if extra else ""))
    return shown


def check_report(
    report: CheckReport,
    exercise: Exercise,
    interview_left: float | None = None,
    watching: bool = False,
    verbose: bool = False,
    show_output: bool = False,
    output_file: Path | None = None,
    summary: bool = True,
) -> None:
    """The verdict of every stage, then what failed, then one summary line (unless
    ``summary`` is False: a caller that draws pictures says it last, with
    :func:`check_summary`).

    A pass (or ``verbose``) is one table with every stage's words. A failure is made
    to fit a screen: a table of one line per stage, then each failure below it at the
    full width of the terminal, the first one with its details, a problem shown
    in several stages only once (``--verbose`` and ``--json`` have everything).
    """
    file_name = Path(report.file).name
    out.print(
        f"Checking [bold]{file_name}[/] against [bold]{exercise.id}[/] "
        f"[dim](seed {report.seed}, sha256 {report.file_sha256[:12]})[/]"
    )
    short = not report.passed and not verbose
    table = _table(show_lines=not short, expand=True)
    table.add_column("Stage", no_wrap=True)
    table.add_column("Details", ratio=1)
    for stage in report.stages:
        label, style = _VERDICT_STYLE[stage.verdict.value]
        body = _text(stage.message)
        if short:
            body.no_wrap, body.overflow = True, "ellipsis"
        else:
            for line in stage.details:
                body.append("\n" + line, style="" if stage.verdict.value == "fail" else "dim")
        table.add_row(_text(label + " ", style=style) + _text(stage.title), body)
    out.print(table)
    if short:
        _failures(report)
    for note in _distinct_notes(report.notes):
        out.print(_text("note: ", style="bold yellow") + _text(note))
    if report.protection is not None and report.protection.missing:
        # Said only when something is missing: a full level is the quiet default.
        out.print(
            _text("host protection: ", style="bold yellow")
            + _protection(report.protection)
            + _text(PROTECTION_ADVICE, style="dim")
        )
    _printed(report, report.first_failure, show_output, output_file)
    if summary:
        check_summary(report, exercise, interview_left, watching)


def check_summary(
    report: CheckReport,
    exercise: Exercise,
    interview_left: float | None = None,
    watching: bool = False,
) -> None:
    """The one line that ends a check's report: the verdict and what to do next."""
    if report.bug is not None:  # no verdict: the check did not finish
        bug = report.bug
        out.print(
            _text("✘ ", style="bold magenta") + _text(bug_message(bug.where, bug.path, bug.error))
        )
        return
    sentence = report.verdict_sentence()
    mark, style = ("✔ ", "bold green") if sentence.passed else ("✘ ", "bold red")
    line = _text().append(mark + sentence.head, style=style).append(sentence.rest + ".")
    if not sentence.passed:
        line.append(f" Fix {Path(report.file).name} and ")
        if watching:
            line.append("save it again; stuck? press ").append("h", style="bold")
        else:
            line.append("run ").append("trainer check", style="bold").append(" again; stuck? ")
            line.append(f"trainer hint {exercise.id}", style="bold")
        line.append(".")
    if interview_left is not None:
        line.append(f" Interview: {_clock(interview_left)} left.", style="bold magenta")
    out.print(line)


# `check --show-output` shows this much of the output in the terminal; longer output is
# shown by its first and last lines, and is whole in the output file whose path is given.
SHOWN_OUTPUT_LINES = 200
SHOWN_OUTPUT_ENDS = 20


def _size(size: int) -> str:
    for unit in ("bytes", "kB", "MB"):
        if size < 1000 or unit == "MB":
            return f"{size:,} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1000  # type: ignore[assignment]
    return f"{size} MB"


def _all_output(report: CheckReport, output_file: Path) -> None:
    """Everything the code printed, from its first line (import time included): in full
    when it is short, else its first and last lines and the file that holds all of it."""
    try:
        size = output_file.stat().st_size
        with output_file.open("rb") as stream:
            head = [stream.readline() for _ in range(SHOWN_OUTPUT_LINES + 1)]
    except OSError:
        size, head = 0, []
    head = [line for line in head if line]
    count = plural(report.output_lines, "line")
    where = _link(output_file)
    if not size:
        out.print("[dim]Your code printed nothing.[/]")
        return
    lines = [line.decode("utf-8", "replace").rstrip("\n") for line in head]
    if len(lines) <= SHOWN_OUTPUT_LINES:
        title = f"your code printed {count} ({_size(size)}), all of it"
        out.print(_panel(_text("\n".join(lines)), title=title, expand=False))
        out.print(f"[dim]It is also in[/] {where}")
        return
    tail = _last_lines(output_file, SHOWN_OUTPUT_ENDS)
    left_out = report.output_lines - 2 * SHOWN_OUTPUT_ENDS
    body = _text("\n".join(lines[:SHOWN_OUTPUT_ENDS]))
    body.append(f"\n… {plural(left_out, 'line')} not shown here …\n", style="dim")
    body.append("\n".join(tail))
    title = f"your code printed {count} ({_size(size)}): the first and last {SHOWN_OUTPUT_ENDS}"
    out.print(_panel(body, title=title, expand=False))
    out.print(f"All {count} are in [bold]{where}[/]; to page them: less {_relative(output_file)}")


def _last_lines(path: Path, count: int) -> list[str]:
    """The last ``count`` lines of a file, reading only its end."""
    with path.open("rb") as stream:
        stream.seek(0, 2)
        end = stream.tell()
        stream.seek(max(end - 64 * 1024, 0))
        text = stream.read().decode("utf-8", "replace")
    return text.rstrip("\n").split("\n")[-count:]


def _printed(
    report: CheckReport,
    failure: StageResult | None,
    show_output: bool,
    output_file: Path | None = None,
) -> None:
    """What the learner's code printed: all of it when asked; else, on a failure, what it
    printed during the failing stage; on a pass, only that something was printed."""
    count = plural(report.output_lines, "line")
    if show_output and output_file is not None:
        _all_output(report, output_file)
        return
    if show_output and report.output.strip():
        out.print(
            _panel(_text(report.output.rstrip()), title=f"your code printed {count}", expand=False)
        )
        return
    if failure is not None:
        case = f"{failure.id}|{failure.case}"
        during = report.output_by_stage.get(case, "").rstrip()
        where = f"for {failure.case}" if during else ""
        if not during:
            during = report.output_by_stage.get(failure.id, "").rstrip()
            where = f"during {failure.title.lower()}"
        if during:
            lines = during.splitlines()
            shown = "\n".join(lines[-15:])
            title = f"your code printed {where} (last {min(len(lines), 15)} lines)"
            out.print(_panel(_text(shown), title=title, expand=False))
            out.print(
                _text(
                    f"{count} printed in all: trainer check --show-output shows them", style="dim"
                )
            )
        return
    if report.output_lines:
        out.print(
            _text(f"note: your code printed {count}, hidden on a pass ", style="dim")
            + _text("(trainer check --show-output shows them)", style="dim")
        )


def _failures(report: CheckReport) -> None:
    """Each failure at full width: the first with its details, the others without them
    (``--verbose`` shows them); one that repeats an earlier stage's error is not repeated."""
    from rich.padding import Padding

    hidden = 0
    first = report.first_failure
    for stage in report.stages:
        if stage.verdict.value != "fail" or stage.same_as:  # said by an earlier stage
            continue
        body = _text(stage.message)
        if stage is first:
            for line in stage.details:
                body.append("\n" + line)
        else:
            hidden += len(stage.details)
        out.print(_text(f"✘ {stage.title}", style="bold red"))
        out.print(Padding(body, (0, 0, 0, 2), expand=False))
    if hidden:
        out.print(f"[dim]({plural(hidden, 'more line')} of details: trainer check --verbose)[/]")


def after_pass(exercise: Exercise) -> None:
    out.print(f"Lock in the concepts: [bold]trainer quiz {exercise.id}[/].")


def ask_yes_no(question: str, default: bool = True) -> bool:
    answer = ask(f"{question} {'[Y/n]' if default else '[y/N]'} ")
    if answer is None:
        return False
    answer = answer.strip().lower()
    return default if answer == "" else answer in ("y", "yes")


def ask(prompt: str) -> str | None:
    """One line from the user, or None at end of input."""
    try:
        answer: str = out.input(prompt, markup=False)  # "[y/N]" is text, not markup
    except EOFError:
        out.print()  # what comes next starts on its own line, not after the prompt
        return None
    if not sys.stdin.isatty():
        out.print(answer, highlight=False)  # piped answers: keep the transcript readable
    return answer


def _plain_box(title: str, body: str) -> str:
    """A rounded box like rich's panel, drawn without rich (hints must start fast)."""
    import shutil
    import textwrap

    plain = _INLINE.sub(lambda m: next(g for g in m.groups() if g is not None), body)
    width = max(min(shutil.get_terminal_size((80, 24)).columns, 100), 30)
    lines = []
    for paragraph in reflow(plain).split("\n"):
        lines += textwrap.wrap(paragraph, width - 4, break_on_hyphens=False) or [""]
    inner = max((len(line) for line in lines), default=0)
    inner = max(inner, len(title) + 2)
    bold = "\x1b[1m" if sys.stdout.isatty() else ""
    reset = "\x1b[0m" if bold else ""
    head = f" {bold}{title}{reset} "
    dashes = inner + 2 - len(title) - 2
    top = "╭" + "─" * (dashes // 2) + head + "─" * (dashes - dashes // 2) + "╮"
    middle = [f"│ {line.ljust(inner)} │" for line in lines]
    return "\n".join([top, *middle, "╰" + "─" * (inner + 2) + "╯"])


def plain(text: str) -> None:
    """One line on stdout, without rich."""
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def hint(exercise: Exercise, number: int, text: str, last: bool, watching: bool = False) -> None:
    total = len(exercise.hints)
    plain(_plain_box(f"Hint {number} of {total}", text))
    if watching:
        plain("That is the last hint." if last else f"Still stuck? Press h for hint {number + 1}.")
    elif last:
        plain(
            "That is the last hint. Run trainer check when ready; "
            f"trainer hint {exercise.id} --all shows every hint."
        )
    else:
        plain(f"Still stuck? trainer hint again for hint {number + 1}.")


def all_hints(exercise: Exercise) -> None:
    for number, text in enumerate(exercise.hints, start=1):
        plain(_plain_box(f"Hint {number} of {len(exercise.hints)}", text))


def quiz_question(number: int, total: int, question: QuizQuestion) -> None:
    # Spec text is printed as Text, never as markup: `g[i, j]` must stay as written.
    out.print(_text(f"\nQuestion {number} of {total}. ", style="bold") + _text(question.question))
    for index, choice in enumerate(question.choices, start=1):
        out.print(_text(f"  {index}. {choice}"))


def quiz_feedback(question: QuizQuestion, correct: bool) -> None:
    if correct:
        out.print(_text("✔ Right. ", style="bold green") + _text(question.explanation))
    else:
        answer = question.choices[question.answer - 1]
        out.print(
            _text("✘ Not quite. ", style="bold red")
            + _text(f"The answer is {question.answer}. {answer}\n{question.explanation}")
        )


def quiz_score(exercise: Exercise | SharedQuiz, score: int, total: int, best: int | None) -> None:
    out.print(
        f"\n[bold]Score: {score} of {total}.[/]"
        + (f" Best so far: {best} of {total}." if best is not None else "")
    )
    if score < total:
        out.print(f"Take it again any time: [bold]trainer quiz {exercise.id}[/].")


# The whiteboard (`trainer derive`): the data comes from trainer.derive and trainer.whiteboard.

FORMULA_LANGUAGE = (
    "Write + - * / ^ (or **), @ (matrix product), ᵀ or .T; a comparison is 1 or 0; exp log "
    "sqrt abs sign tanh sigmoid (σ) softplus relu erf Phi phi, max(a, b), min(a, b), "
    "where(c, a, b); sum(e, dim), mean, var, amax, logsumexp keep dim as size 1 (dim may "
    "be (0, 1) or all_but(1); no dim: all); softmax(e, dim), unsqueeze(e, dim), numel(e), "
    "size(e, dim), onehot(t, C), tril(e), reshape(e, like); sum_to(e, name) sums e down to "
    "an input's shape."
)


def derive_board(exercise: Exercise, names: Sequence[tuple[str, str]]) -> None:
    """The question: the function, the names a formula may use, the language."""
    width = max(len(name) for name, _ in names)
    body = _text("Before the code, the gradient, as on a whiteboard:\n\n")
    body.append(f"y = {exercise.reference}\n\n", style="bold cyan")
    for name, meaning in names:
        body.append(f"  {name.ljust(width)}", style="bold")
        body.append(f"  {meaning}\n")
    body.append("\n" + FORMULA_LANGUAGE, style="dim")
    out.print(_panel(body, title=_text(f"Derive: {exercise.title}", style="bold"), expand=False))


def formula_not_understood(text: str, start: int, end: int, message: str) -> None:
    """Where the formula stops making sense: a caret under it, then why."""
    out.print(
        _text(f"✘ Not understood at character {start + 1}: ", style="bold red") + _text(message)
    )
    out.print(_text(f"  {text}"))
    out.print(
        _text("  " + " " * start + "^" * max(1, min(end, len(text)) - start), style="bold red")
    )
    out.print("Type it again; nothing was counted.")


def formula_right(name: str, runs: int) -> None:
    out.print(
        _text("✔ Right. ", style="bold green")
        + _text(
            f"It equals dL/d{name} on all {plural(runs, 'case')} of the checker "
            "(random inputs and upstream gradients, float64)."
        )
    )


def formula_wrong(
    text: str,
    words: str,
    case: str,
    wrong_runs: int,
    runs: int,
    view: Sequence[str],
    error_span: tuple[int, int] | None,
    tries_left: int,
) -> None:
    """A wrong formula: the nearest classic mistake, where, and what is left to do."""
    on = "every case" if wrong_runs == runs else f"{wrong_runs} of {runs} cases"
    out.print(_text(f"✘ Wrong on {on}: ", style="bold red") + _text(f"{words}."))
    if error_span is not None:
        start, end = error_span
        out.print(_text(f"  {text}"))
        out.print(
            _text("  " + " " * start + "^" * max(1, min(end, len(text)) - start), style="bold red")
        )
    else:
        out.print(_text(f"  For {case}" + (":" if view else "."), style="dim"))
        for line in view:
            out.print(_text(f"    {line}", style="dim"))
    if tries_left:
        out.print(
            f"Try again ({plural(tries_left, 'try', 'tries')} left), or press Enter for the answer."
        )


def formula_answer(name: str, formula: str) -> None:
    out.print(_text(f"The answer: dL/d{name} = ", style="bold") + _text(formula, style="bold cyan"))


def derive_score(exercise: Exercise, right: int, total: int, attempts: int, passed: bool) -> None:
    record = "derived" if passed else "not derived yet"
    out.print(
        f"\n[bold]{right} of {total} right.[/] {exercise.id}: {record} "
        f"({plural(attempts, 'attempt')}; trainer derive --list shows them all)."
    )
    if right < total:
        out.print(f"Take it again any time: [bold]trainer derive {exercise.id}[/].")
    else:
        out.print(f"Now write it as code: [bold]trainer start {exercise.id}[/].")


def derive_list(exercises: Sequence[Exercise], state: State) -> None:
    """The exercises with a formula to derive, and the record of each."""
    for exercise in exercises:
        progress = state.exercises.get(exercise.id, Progress())
        mark = (
            _text("derived", style="green")
            if progress.derive_passed
            else _text(f"{plural(progress.derive_attempts, 'attempt')}", style="yellow")
            if progress.derive_attempts
            else _text("–", style="dim")
        )
        out.print(_text(f"{exercise.id:<14}  ") + mark, no_wrap=True, crop=True)
    derived = sum(state.exercises.get(e.id, Progress()).derive_passed for e in exercises)
    out.print(f"{derived} of {len(exercises)} derived. Begin with [bold]trainer derive ID[/].")


def exercise_list(exercises: Sequence[Exercise], state: State, workspace: Path | None) -> None:
    """One line per exercise, its track's id (what `trainer next -t` takes) on the first
    line of each track; the footer is one line, so that the catalogue fits a 40-row
    screen.

    Columns are dropped as the terminal narrows (title first, then the best timed
    interview, the follow-ups passed, whether the solution was seen, quiz and hints),
    so that no line wraps: at 80 columns every column but the title and the best timed
    interview fits.
    """
    from trainer.spec import OTHER_TRACK

    if out.is_terminal and len(exercises) + 3 > out.height:
        _exercise_grid(exercises, state, workspace)
        return
    width = out.width
    id_width = max([len("Exercise"), *(len(e.id) for e in exercises)])
    track_width = max([len("Track"), *(len(e.track or OTHER_TRACK) for e in exercises)])
    # name, width, right-aligned; in the order they are dropped (last first).
    columns = [
        ("Exercise", id_width, False),
        ("Level", 6, False),
        ("Status", 7, False),
        ("Hints", 5, True),
        ("Quiz", 5, True),
        ("Sol.", 4, False),
        ("F-ups", 5, True),
        ("Timed", 7, True),
    ]
    fixed = track_width + 3  # the track, then the current-exercise marker and its space
    while fixed + sum(w + 2 for _, w, _ in columns) - 2 > width and len(columns) > 3:
        columns.pop()
    used = fixed + sum(w + 2 for _, w, _ in columns)
    title_width = width - used if width - used >= 24 else 0

    def line(track: Text, cells: list[Text], marker: str = " ") -> Text:
        track.truncate(track_width, overflow="ellipsis")
        row = track + _text(" " * (track_width - track.cell_len) + f" {marker} ")
        for (_, column_width, right), cell in zip(columns, cells, strict=False):
            cell.truncate(column_width, overflow="ellipsis")
            padding = " " * (column_width - cell.cell_len)
            row.append_text(_text(padding) + cell if right else cell + _text(padding))
            row.append("  ")
        if title_width and len(cells) > len(columns):
            title = cells[-1]
            title.truncate(title_width, overflow="ellipsis")
            row.append_text(title)
        row.rstrip()
        return row

    heading = [_text(name, style="bold") for name, _, _ in columns]
    if title_width:
        heading.append(_text("Title", style="bold"))
    out.print(line(_text("Track", style="bold"), heading), no_wrap=True, crop=True)
    passed = 0
    track: str | None = "none yet"
    for exercise in exercises:
        shown_track = _text()
        if exercise.track != track:
            track = exercise.track
            shown_track = _text(track or OTHER_TRACK, style="bold cyan")
        progress = state.exercises.get(exercise.id, Progress())
        passed += progress.passed
        status = (
            _text("passed", style="green")
            if progress.passed
            else _text("started", style="yellow")
            if progress.started
            else _text("–", style="dim")
        )
        quiz = (
            f"{progress.quiz_best}/{progress.quiz_total}" if progress.quiz_best is not None else "–"
        )
        cells = [
            _text(exercise.id),
            _text(exercise.difficulty),
            status,
            _text(f"{progress.hints_shown}/{len(exercise.hints)}"),
            _text(quiz),
            _text("seen", style="yellow") if progress.solution_seen else _text("–", style="dim"),
            _follow_up_tally(exercise, progress),
            _text(_best_interview(progress.best_interview)),
        ][: len(columns)]
        cells.append(_text(exercise.title, style="dim"))
        marker = "→" if state.current == exercise.id else " "
        out.print(line(shown_track, cells, marker), no_wrap=True, crop=True)
    out.print(_list_footer(exercises, passed, state, workspace))


def _follow_up_tally(exercise: Exercise, progress: Progress) -> Text:
    """The follow-ups passed of the exercise's ("1/2"; green when all are); nothing for an
    exercise without follow-ups."""
    from trainer.follow_ups import status

    where = status(exercise, progress)
    return _text(where.tally or "", style="green" if where.all_passed else "")


def _list_footer(
    exercises: Sequence[Exercise], passed: int, state: State, workspace: Path | None
) -> str:
    footer = f"{passed} of {len(exercises)} passed."
    if workspace is None and exercises:
        footer += " No workspace here or above: [bold]trainer next[/] makes one."
    elif state.current is None and exercises:
        footer += f" Begin with [bold]trainer next[/] ({exercises[0].id})."
    if state.interview is not None:
        footer += f" Interview under way on [bold]{state.interview.exercise}[/]."
    return footer


def _exercise_grid(exercises: Sequence[Exercise], state: State, workspace: Path | None) -> None:
    """The list on a screen too short for a line per exercise (a taller one shows hints,
    quiz and level too): each track's exercises side by side, each with what the learner
    did (✔ passed, then its follow-ups passed of how many, ○ started, "seen": the solution
    was looked at); the track's id begins its first line."""
    from trainer.spec import OTHER_TRACK

    width = out.width
    track_width = max([len("Track"), *(len(e.track or OTHER_TRACK) for e in exercises)])
    cells: list[tuple[str | None, Text]] = []
    passed = 0
    for exercise in exercises:
        progress = state.exercises.get(exercise.id, Progress())
        passed += progress.passed
        cell = _text("→ " if state.current == exercise.id else "  ")
        cell.append(exercise.id)
        if progress.passed:
            cell.append(" ✔", style="green")
            if exercise.follow_ups:
                cell.append(" ").append_text(_follow_up_tally(exercise, progress))
        elif progress.started:
            cell.append(" ○", style="yellow")
        if progress.solution_seen:
            cell.append(" seen", style="yellow")
        cells.append((exercise.track, cell))
    cell_width = max(c.cell_len for _, c in cells) + 2
    per_row = max(1, (width - track_width - 1) // cell_width)
    out.print(
        _text("Track".ljust(track_width + 1), style="bold")
        + _text("✔ passed, 1/2 follow-ups, ○ started, seen: solution, → current", style="bold"),
        no_wrap=True,
        crop=True,
    )
    tracks = list(dict.fromkeys(track for track, _ in cells))
    for track in tracks:
        mine = [c for t, c in cells if t == track]
        for start in range(0, len(mine), per_row):
            name = (track or OTHER_TRACK) if start == 0 else ""
            row = _text()
            row.append(name.ljust(track_width), style="bold cyan")
            for cell in mine[start : start + per_row]:
                row.append_text(cell + _text(" " * (cell_width - cell.cell_len)))
            row.rstrip()
            out.print(row, no_wrap=True, crop=True)
    out.print(_list_footer(exercises, passed, state, workspace))


def stats(numbers: Stats) -> None:
    """`trainer stats`: the lines of :func:`trainer.charts.stats_text`, at the terminal's width."""
    from trainer.charts import stats_text

    for line in stats_text(numbers, out.width):
        out.print(_text(line), no_wrap=True, crop=True)


def _when(moment: float) -> str:
    """A future moment as a date and how far off it is: "on 2025-10-12 (in 2 days)"."""
    from trainer.history import CLOCK, DAY, date_of

    days = max(round((moment - CLOCK()) / DAY), 0)
    off = "today" if days == 0 else "tomorrow" if days == 1 else f"in {days} days"
    return f"on {date_of(moment)} ({off})"


def _due_words(exercises: Sequence[str], questions: int = 0) -> str:
    parts = [", ".join(exercises)] if exercises else []
    if questions:
        parts.append(plural(questions, "quiz question"))
    return "; ".join(parts)


def review_started(exercise: Exercise, started: ReviewStart, agenda: Agenda) -> None:
    """A review opened (or resumed): the statement, its file, and what else is due."""
    statement(exercise)
    shown = _link(started.path)
    if started.resumed:
        out.print(f"Your review of [bold]{exercise.id}[/] goes on in [bold]{shown}[/].")
    else:
        out.print(
            f"Review of [bold]{exercise.id}[/], from a fresh stub in [bold]{shown}[/]; "
            "your solved file is left as it is."
        )
    out.print(
        "\n[bold]Next steps[/]\n"
        f"  1. Write [bold]backward()[/] in `{exercise.class_name}` again, without looking.\n"
        "  2. Run [bold]trainer check[/]: it checks this file, and its first verdict\n"
        "     counts as the review (a clean one puts the next review further off)."
    )
    others = [d.exercise.id for d in agenda.exercises if d.exercise.id != exercise.id]
    if others or agenda.questions:
        out.print(f"Also due: {_due_words(others, len(agenda.questions))}.")
        if agenda.questions:
            out.print("The questions: [bold]trainer review --quiz[/].")


def review_result(exercise_id: str, clean: bool, next_due: float) -> None:
    """The first check of a review: its result and when the next one is."""
    verdict = "clean" if clean else "failed: it comes back sooner"
    notice(f"Review of {exercise_id} {verdict}. The next review {_when(next_due)}.")


def nothing_due(agenda: Agenda, quiz: bool = False) -> None:
    what = "No quiz question is" if quiz else "Nothing is"
    if not agenda.any_passed and agenda.next_due is None:
        out.print(
            f"{what} due for review: reviews begin a day after your first pass. "
            "[bold]trainer next[/] starts an exercise."
        )
        return
    line = f"{what} due for review."
    if agenda.under_way:
        line += f" Under way: {', '.join(agenda.under_way)} ([bold]trainer check[/] it)."
    if agenda.next_due is not None:
        line += f" The next: [bold]{agenda.next_what}[/] {_when(agenda.next_due)}."
    if quiz and agenda.exercises:
        line += f" Exercises due: {_due_words([d.exercise.id for d in agenda.exercises])}."
    out.print(line)


def review_question(number: int, total: int, due: DueQuestion) -> None:
    if number == 1:
        out.print(f"[bold]{plural(total, 'quiz question')} due for review.[/]")
    where = "the concepts quiz" if due.quiz.id == "concepts" else f"the quiz of {due.quiz.id}"
    out.print(_text(f"\nFrom {where} (question {due.number}):", style="dim"))


def review_answers(right: int, total: int, agenda: Agenda) -> None:
    out.print(f"\n[bold]{right} of {total} right.[/] A wrong answer comes back tomorrow.")
    if agenda.exercises:
        due = _due_words([d.exercise.id for d in agenda.exercises])
        out.print(f"Exercises due: {due}: [bold]trainer review[/].")


def review_due(agenda: Agenda) -> None:
    """The line of `trainer list` that says what is due for review (none when nothing is)."""
    if not agenda.nothing_due:
        due = _due_words([d.exercise.id for d in agenda.exercises], len(agenda.questions))
        out.print(f"Due for review: {due}: [bold]trainer review[/].")


def plan_cleared() -> None:
    out.print(
        "The study plan is cleared: [bold]trainer next[/] follows the order of "
        "[bold]trainer list[/] again."
    )


def study_plan(plan: Schedule, made: bool = False) -> None:
    """The plan day by day at the terminal's width: what is passed (✓), what is left,
    today marked (→), and today's work."""
    import textwrap

    from trainer.charts import duration
    from trainer.spec import TRACKS

    width = max(out.width, 50)
    scope = f"the track {TRACKS.get(plan.track, plan.track)}" if plan.track else "every track"
    hours = plural(round(plan.hours, 2), "hour")
    verb = "Made a study plan" if made else "Your study plan"
    out.print(
        f"{verb}: {plural(len(plan.days), 'day')}, {plan.start} to {plan.end}, {hours} a "
        f"day, {scope}: {plan.passed} of {plan.total} exercises passed."
    )
    if plan.core:
        core = ", ".join(plan.core)
        out.print(_text(f"Interview core first, with what it requires: {core}.", style="dim"))
    if plan.done_before:
        out.print(f"Passed before the plan: {', '.join(plan.done_before)}.")
    column = width - 24  # marker, day, date, two spaces each side, time
    out.print(_text(f"   Day  Date   {'Exercises (✓ passed)'.ljust(column)}  Time", style="bold"))
    for day in plan.days:
        if not day.done and not day.todo:
            continue
        names = [f"✓ {i}" for i in day.done] + day.todo
        lines = textwrap.wrap(", ".join(names), column, break_on_hyphens=False) or [""]
        marker = "→" if plan.today == day.number else " "
        style = "bold" if plan.today == day.number else ""
        time = f"{day.minutes // 60}h{day.minutes % 60:02d}"
        first = f" {marker} {day.number:>3}  {day.day[5:]}  {lines[0].ljust(column)}  {time}"
        out.print(_text(first.rstrip(), style=style), no_wrap=True, crop=True)
        for more in lines[1:]:
            out.print(_text(f"{'':15}{more}", style=style), no_wrap=True, crop=True)
    if plan.left_over:
        out.print(
            f"[yellow]Not in the days left:[/] {', '.join(plan.left_over)} (about "
            f"{duration(plan.left_over_minutes * 60)} more): add days or hours, e.g. "
            f"[bold]trainer plan --days {len(plan.days) + 7}[/]."
        )
    if plan.next_up is None:
        out.print("[green]Every exercise of the plan is passed.[/]")
        return
    today = plan.today_work()
    if today is None:
        out.print(f"The plan's days are over. Next: [bold]trainer next[/] starts {plan.next_up}.")
        return
    left = len(today.todo)
    work = ", ".join(today.todo) if today.todo else "done for today"
    out.print(
        f"Today, day {today.number} of {len(plan.days)}: {work}"
        + (f" ({plural(left, 'exercise')})" if left else "")
        + f". [bold]trainer next[/] starts {plan.next_up}."
    )


def _clock(seconds: float) -> str:
    from trainer.interview import format_duration  # imported on use: start-up stays light

    return format_duration(seconds)


def _best_interview(best: dict[str, object] | None) -> str:
    if not best:
        return "–"
    seconds = best.get("seconds")
    shown = _clock(float(seconds)) if isinstance(seconds, int | float) else "?"
    return f"✔ {shown}" if best.get("passed") else f"✘ {shown}"


def clear() -> None:
    if out.is_terminal:
        out.clear()


def watch_keys(passed: bool) -> None:
    keys = "[bold]h[/] next hint · [bold]c[/] re-check · [bold]q[/] quit"
    if passed:
        keys += " · [bold]n[/] next exercise"
    out.print(f"[dim]Watching for saves.[/] {keys}")


def all_passed(count: int, track: str | None = None) -> None:
    where = f" of {track}" if track else ""
    every = "The exercise" if count == 1 else f"All {count} exercises"
    out.print(
        f"[bold green]{every}{where} passed.[/] Try one against the clock: "
        "[bold]trainer interview[/]."
    )


def reset_done(exercise: Exercise, path: Path, backup: Path | None) -> None:
    if backup is not None:
        out.print(f"Your file was saved to [bold]{_link(backup)}[/].")
    else:
        out.print(f"Your {exercise.id} file was already the stub: nothing to back up.")
    out.print(f"[bold]{_link(path)}[/] holds the stub of [bold]{exercise.id}[/] again.")


def no_editor(path: Path) -> None:
    out.print(
        f"Your scratch file: [bold]{_link(path)}[/]\n"
        "No editor is set: set $VISUAL or $EDITOR (e.g. export EDITOR='code --wait') and "
        "`trainer open` opens it there."
    )


def solution(exercise: Exercise, source: str, passed: bool) -> None:
    """The reference solution, highlighted. In a box with line numbers when every line
    fits the terminal; otherwise plain, each line whole (the terminal wraps it), so no
    character is ever cut off."""
    from rich.syntax import Syntax

    title = f"Reference solution: {exercise.id}" + ("" if passed else " (not passed yet)")
    lines = source.expandtabs().splitlines() or [""]
    gutter = len(str(len(lines))) + 3  # line numbers and their margin
    boxed = max(len(line) for line in lines) + gutter + 4 <= out.width
    syntax = Syntax(source, "python", line_numbers=boxed, word_wrap=False)
    if boxed:
        out.print(_panel(syntax, title=title, expand=False))
    else:
        out.print(_text(title, style="bold"))
        out.print(syntax.highlight(source), soft_wrap=True)
    if exercise.notes:
        out.print(_panel(markdown(exercise.notes), title="What to notice", expand=False))


def derivation(shown: Derivation) -> None:
    """An exercise's worked derivation (`trainer explain`, and a check's first pass): in a
    box when every line fits the terminal; otherwise plain, each line whole, as the
    solution is. Its lines are math, laid out by the author: never reflowed."""
    title = f"How the gradient is derived: {shown.exercise}" + (
        "" if shown.passed else " (not passed yet)"
    )
    lines = shown.text.expandtabs().splitlines()
    body = _text(shown.text.expandtabs())
    if max(len(line) for line in lines) + 4 <= out.width:
        out.print(_panel(body, title=title, title_align="left", expand=False))
    else:
        out.print(_text(title, style="bold"))
        out.print(body, soft_wrap=True)


def after_pass_derivation(after: AfterCheck) -> None:
    """Under a passing check's report: the derivation on the exercise's first pass, and
    where to see it again (on every pass)."""
    if after.derivation is not None:
        derivation(after.derivation)
    out.print(f"See it again: [bold]trainer explain {after.exercise}[/]")


def interview_started(exercise: Exercise, minutes: float) -> None:
    after = (
        " After the pass the interviewer asks a follow-up, in the time left."
        if exercise.follow_ups
        else ""
    )
    out.print(
        f"\n[bold magenta]Interview started on {exercise.id}: {plural(minutes, 'minute')}.[/] Every "
        "[bold]trainer check[/] shows the time left; hints are allowed but counted."
        f"{after} End early with [bold]trainer interview --stop[/]."
    )


def interview_summary(summary: InterviewSummary) -> None:
    verdict = {
        "passed": "[bold green]passed[/]",
        "stopped": "[yellow]stopped[/]",
        "time up": "[bold red]time up[/]",
    }.get(summary.reason, summary.reason)
    # The title on a line of its own: as the table's title it would wrap to the table's width.
    out.print(f"[bold]Interview on {summary.exercise}:[/] {verdict}", no_wrap=True)
    table = _table(show_header=False)
    table.add_row("Time taken", f"{_clock(summary.seconds)} of {_clock(summary.minutes * 60)}")
    table.add_row("Checks run", str(summary.checks))
    table.add_row("Hints used", str(summary.hints))
    if summary.follow_up_words is not None:
        table.add_row("Follow-up", summary.follow_up_words)
    out.print(table)


@contextlib.contextmanager
def progress(label: str, total: int | None) -> Iterator[Callable[[], None]]:
    """A progress line on stderr; yields the function that counts one item done."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err.real(),
        transient=True,
        disable=not err.is_terminal,
    )
    task = bar.add_task(label, total=total)
    lock = threading.Lock()

    def advance() -> None:
        with lock:
            bar.advance(task)

    with bar:
        yield advance


def validation_table(results: Sequence[Validation]) -> None:
    """A narrow table of marks, one row per spec, then each spec's problems one per line
    below it at the terminal's full width: every word shows at 80 and at 60 columns."""
    from rich import box

    table = _table(title="Validation", box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("Spec", overflow="fold")
    for name in ("Schema", "Stub", "Solution", "Wrong", "Content"):
        table.add_column(name, no_wrap=True, justify="center")

    def mark(ok: bool) -> Text:
        return _text("✔", style="green") if ok else _text("✘", style="bold red")

    for result in results:
        right = sum(v.ok for v in result.variants)
        loaded = not result.schema
        table.add_row(
            result.exercise_id or Path(result.spec).stem,
            mark(loaded and not result.derive),
            mark(not result.stub) if loaded else _text("–"),
            mark(not result.solution) if loaded else _text("–"),
            _text(
                f"{right}/{len(result.variants)}",
                style="green" if right == len(result.variants) else "bold red",
            )
            if loaded
            else _text("–"),
            _text(f"⚠ {len(result.warnings)}", style="yellow")
            if result.warnings
            else (_text("✔", style="green") if loaded else _text("–")),
        )
    out.print(table)
    out.print(
        _text(
            "Stub: the untouched stub fails; Solution: the reference solution passes; "
            "Wrong: the wrong variants that fail where declared; Content: warnings.",
            style="dim",
        )
    )
    for result in results:
        if result.problems:
            out.print(_text(f"✘ {result.spec}", style="bold red"))
            for problem in result.problems:
                _bullet(problem.removeprefix(f"{result.spec}: "))
    warned = [(r.spec, w) for r in results for w in r.warnings]
    for spec, warning in warned:
        out.print(_text(f"⚠ {spec}: {warning}", style="yellow"))
    bad = [r for r in results if not r.ok]
    if bad:
        out.print(
            f"[bold red]✘ {len(bad)} of {plural(len(results), 'spec')} "
            f"{'falls' if len(bad) == 1 else 'fall'} short.[/] Fix what is listed above, then "
            "run [bold]trainer validate[/] again."
        )
    else:
        every = "The spec holds" if len(results) == 1 else f"All {len(results)} specs hold"
        out.print(f"[bold green]✔ {every}.[/]")
    if warned:
        count = len(warned)
        out.print(
            f"[yellow]⚠ {count} content warning{'s' * (count != 1)}[/] (they do not fail "
            "validation): the rules are in docs/spec-format.md, under Content rules."
        )


def _bullet(text: str, indent: int = 2) -> None:
    """``text`` after a bullet, wrapped on words with a hanging indent."""
    from rich.table import Table

    row = Table.grid(padding=(0, 1, 0, 0))
    row.add_column(no_wrap=True)
    row.add_column(ratio=1)
    row.add_row(" " * indent + "•", _text(text))
    out.print(row)


def scaffolded(exercise_id: str, files: Sequence[Path], root: Path) -> None:
    for path in files:
        out.print(f"wrote [bold]{_relative(path)}[/]")
    out.print("Edit them (every field is explained), then validate this exercise alone:")
    command = (
        f"trainer --exercises-dir {_plain_relative(root)} validate {_plain_relative(files[0])}"
    )
    out.print(_text(f"  {command}", style="bold"), soft_wrap=True)  # whole, to copy


PROTECTION_ADVICE = (
    '. Fine for your own file; to check others\' code, see "Host protection" in the README.'
)


def _protection(level: ProtectionLevel) -> Text:
    return _text(level.summary())


def protection_level(level: ProtectionLevel | None) -> None:
    """The host protection every check of a grade runs under, said once at the top."""
    if level is None:
        out.print(_text("Host protection: unknown", style="bold yellow"))
        return
    style = "bold green" if level.level == "full" else "bold yellow"
    out.print(_text("Host protection: ", style=style) + _protection(level))


def grade_table(book: Gradebook, written: Sequence[Path] = ()) -> None:
    """One row per submission: its verdict, its score, and each stage's mark."""
    table = _table(title=f"Grades: {book.exercise}")
    table.add_column("Submission", no_wrap=True)
    table.add_column("Verdict")
    table.add_column("Score", justify="right", no_wrap=True)
    table.add_column("Stages", no_wrap=True)
    table.add_column("First failure", ratio=1)
    styles = {
        "pass": "bold green",
        "fail": "bold red",
        "error": "bold yellow",
        "bug": "bold magenta",
    }
    marks = {"pass": ("✔", "green"), "fail": ("✘", "red"), "skip": ("–", "dim")}
    for item in book.grades:
        stages = _text("")
        for stage in item.stages:
            mark, style = marks.get(stage.verdict, ("?", ""))
            stages.append(mark, style=style)
        failure = f"{_stage_title(item.stage)}: {item.message}" if item.stage else item.message
        if item.verdict == "bug":  # said in full below the table: its path must not be cut
            failure = f"{BUG_WORDS} (below)"
        name = _text(_as_given(item.submission))
        if item.flags:
            name.append(" ⚑", style="bold yellow")
        table.add_row(
            name,
            _text(item.verdict, style=styles[item.verdict]),
            _text(f"{item.score}/{item.max_score}"),
            stages,
            _text(failure),  # never markup: `grad_output[mask]` stays as written
        )
    out.print(table)
    if book.grades:
        titles = ", ".join(s.title for s in book.grades[0].stages)
        out.print(_text(f"Stages, in order: {titles}.", style="dim"))
    for item in book.grades:
        if item.verdict == "bug":
            out.print(
                _text("✘ ", style="bold magenta")
                + _text(f"{_as_given(item.submission)}: {item.message}")
            )
        for flag in item.flags:
            out.print(
                _text("⚑ ", style="bold yellow")
                + _text(f"{_as_given(item.submission)}: {flag.words()}")
            )
    passed = sum(g.verdict == "pass" for g in book.grades)
    share = f" (shard {book.shard[0]}/{book.shard[1]})" if book.shard[1] > 1 else ""
    out.print(f"{passed} of {len(book.grades)} submissions passed{share}.")
    for path in written:
        out.print(f"Written: [bold]{_relative(path)}[/].")


def wheel_written(path: Path) -> None:
    out.print(f"wrote [bold]{_relative(path)}[/]")
    out.print(_text(f"Install it with: pip install {_plain_relative(path)}"), soft_wrap=True)


def classroom_written(files: Sequence[Path], points: Sequence[tuple[str, int]]) -> None:
    """What ``classroom init`` wrote, and what each exercise is worth."""
    for path in files:
        out.print(f"wrote [bold]{_relative(path)}[/]")
    for exercise_id, total in points:
        out.print(_text(f"  {exercise_id}: {plural(total, 'point')} when every stage passes"))
    total = sum(p for _, p in points)
    out.print(f"{plural(total, 'point')} in all; a stage passed earns its weight.")


def classroom_result(result: dict[str, Any]) -> None:
    """A result's stages and points, on stderr: the step's log (stdout is its output)."""
    tests = result["tests"]
    if result["status"] == "error":  # every test gives the same reason: say it once
        lines = [f"✘ {tests[0]['message']}" if tests else "✘ the check could not run"]
    else:
        lines = [
            f"{'✔' if test['status'] == 'pass' else '✘'} {test['name']} "
            f"({plural(test['score'], 'point')})"
            + (f": {test['message']}" if test["status"] != "pass" else "")
            for test in tests
        ]
    score = sum(test["score"] for test in tests)
    lines.append(f"{result['status']}: {score}/{result['max_score']} points")
    sys.stderr.write("\n".join(lines) + "\n")


def _stage_title(stage_id: str) -> str:
    from trainer.vocabulary import STAGE_BY_ID

    stage = STAGE_BY_ID.get(stage_id)
    return stage.title if stage is not None else stage_id


def pictures(report: CheckReport, plot: bool | None) -> bool:
    """Draw the report's pictures under it, where they help (see trainer.pictures):
    on a wide enough terminal, or when asked with --plot. True when something was drawn."""
    import os
    import shutil
    import sys

    data = [p for stage in report.stages for p in stage.pictures]
    if not data:
        return False
    from trainer.pictures import render_pictures, should_draw, use_color

    terminal = sys.stdout.isatty()
    columns = shutil.get_terminal_size().columns
    if not should_draw(
        plot, json_output=False, is_terminal=terminal, columns=columns, environ=os.environ
    ):
        return False
    from rich.text import Text

    text = render_pictures(
        data, width=min(columns, 100), color=use_color(is_terminal=terminal, environ=os.environ)
    )
    out.print(Text.from_ansi(text))
    return True


# The interviewer's follow-ups (trainer.follow_ups) ------------------------------------------


def follow_up_question(exercise: Exercise, follow_up: FollowUp, number: int) -> None:
    """The question, its hints, and how it is checked from now on."""
    from trainer.follow_ups import stage_title

    total = len(exercise.follow_ups)
    plain(_plain_box(f"Follow-up {number} of {total}: {follow_up.id}", follow_up.question))
    for index, text in enumerate(follow_up.hints, start=1):
        plain(textwrap.fill(f"Hint {index}: {text}", 79, subsequent_indent="        "))
    plain(
        textwrap.fill(
            f"From now on trainer check {exercise.id} grades it too, as the stage "
            f'"{stage_title(follow_up)}". Change your file, then check.',
            79,
        )
    )


def follow_up_list(exercise: Exercise, passed: Sequence[str], active: str | None) -> None:
    for number, follow_up in enumerate(exercise.follow_ups, start=1):
        mark = "passed" if follow_up.id in passed else "taken up" if follow_up.id == active else ""
        plain(f"{number}. {follow_up.id}" + (f" ({mark})" if mark else ""))
        plain(textwrap.indent(textwrap.fill(follow_up.question, 76), "   "))


def no_follow_up(exercise: Exercise, passed: int) -> None:
    if not exercise.follow_ups:
        plain(f"The interviewer has no follow-up for {exercise.id}.")
    else:
        plain(f"Every follow-up of {exercise.id} is passed ({passed} of {passed}).")


def follow_up_after_check(found: FollowUpCheck) -> None:
    """After a check: a passed follow-up, or the next question waiting."""
    if found.graded is not None and found.passed:
        plain(f"Follow-up {found.graded.id} passed.")
    if found.waiting:
        plain(
            textwrap.fill(
                f"The interviewer has a follow-up question ({found.left} left): "
                f"trainer followup {found.exercise}",
                79,
            )
        )


def interview_follow_up(exercise: Exercise, found: FollowUpCheck, left: float | None) -> None:
    """The interview's pass: the interviewer asks a follow-up, in the time left."""
    assert found.asked is not None
    time_left = f", {_clock(left)} left" if left is not None else ""
    out.print(
        f"[bold magenta]The interviewer asks a follow-up{time_left}:[/] the interview ends "
        "when it passes or the time is up."
    )
    follow_up_question(exercise, found.asked, found.asked_number)
