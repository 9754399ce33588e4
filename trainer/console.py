"""Everything the user sees: the only module that talks to rich.

rich is imported on first use, not at start: `trainer hint` prints a small box
of its own and never loads rich's console (about 10 ms of a 60 ms command).
"""

from __future__ import annotations

import contextlib
import re
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainer.spec import Exercise, QuizQuestion
from trainer.state import Progress, State

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    from trainer.authoring import Validation
    from trainer.checking.report import CheckReport, ProtectionLevel
    from trainer.grading import Grade
    from trainer.interview import InterviewSummary
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

    def __getattr__(self, name: str) -> Any:
        if self._console is None:
            from rich.console import Console

            self._console = Console(stderr=self._stderr, highlight=False)
        return getattr(self._console, name)


out: Any = _LazyConsole(stderr=False)
err: Any = _LazyConsole(stderr=True)


def _text(text: str = "", style: str = "") -> Text:
    from rich.text import Text

    return Text(text, style=style)


_VERDICT_STYLE = {
    "pass": ("✔ pass", "bold green"),
    "fail": ("✘ fail", "bold red"),
    "skip": ("– skip", "dim"),
}


_INLINE = re.compile(r"`([^`]+)`|\*\*([^*]+)\*\*|\*([^*\s][^*]*)\*")
_BLOCK = re.compile(r"^\s*([-*+] |\d+\. |#|```|>|\|)", re.MULTILINE)


def markdown(text: str) -> RenderableType:
    """Markdown for the console. A single paragraph (a hint) is rendered here,
    without importing a Markdown parser: `hint` must start fast."""
    if _BLOCK.search(text) or "\n\n" in text.strip():
        from rich.markdown import Markdown

        return Markdown(text)
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
    # soft_wrap: one line, whatever the width, so it can be grepped and copied.
    err.print(_text("error: ", style="bold red") + _text(message), soft_wrap=True)


def notice(message: str) -> None:
    err.print(_text("note: ", style="bold yellow") + _text(message), soft_wrap=True)


def print_json(document: str) -> None:
    # Plain print: exactly one JSON document, no markup or wrapping.
    sys.stdout.write(document + "\n")


def _plain_relative(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _relative(path: Path) -> str:
    """A path for markup strings: relative when it can be, and escaped."""
    from rich.markup import escape

    return escape(_plain_relative(path))


def started(exercise: Exercise, result: StartResult) -> None:
    out.print(
        _panel(
            markdown(exercise.statement), title=_text(exercise.title, style="bold"), expand=False
        )
    )
    shown = _relative(result.path)
    if result.kept_edits:
        out.print(
            f"[yellow]{shown} already has your edits; it was kept as it is.[/]\n"
            f"To start over: [bold]trainer start {exercise.id} --force[/] "
            "(your file is backed up first)."
        )
    elif result.backup is not None:
        out.print(f"Your previous file was saved to [bold]{_relative(result.backup)}[/].")
        out.print(f"A fresh stub is in [bold]{shown}[/].")
    else:
        out.print(f"Your scratch file: [bold]{shown}[/]")
    out.print(
        "\n[bold]Next steps[/]\n"
        f"  1. Open {shown} and write [bold]backward()[/] in `{exercise.class_name}`.\n"
        "  2. Run [bold]trainer check[/] to get a verdict.\n"
        "  3. Stuck? [bold]trainer hint[/] reveals one hint at a time."
    )


def check_report(
    report: CheckReport, exercise: Exercise, interview_left: float | None = None
) -> None:
    file_name = Path(report.file).name
    out.print(
        f"Checking [bold]{file_name}[/] against [bold]{exercise.id}[/] "
        f"[dim](seed {report.seed}, file sha256 {report.file_sha256[:12]})[/]"
    )
    if interview_left is not None:
        out.print(f"[bold magenta]Interview: {_clock(interview_left)} left.[/]")
    table = _table(show_lines=True, expand=True)
    table.add_column("Stage", no_wrap=True)
    table.add_column("Verdict", no_wrap=True)
    table.add_column("Details", ratio=1)
    for stage in report.stages:
        label, style = _VERDICT_STYLE[stage.verdict.value]
        body = _text(stage.message)
        for line in stage.details:
            body.append("\n" + line, style="dim" if stage.verdict.value != "fail" else "")
        table.add_row(stage.title, _text(label, style=style), body)
    out.print(table)
    for note in report.notes:
        out.print(_text("note: ", style="bold yellow") + _text(note))
    if report.protection is not None and report.protection.missing:
        # Said only when something is missing: a full level is the quiet default.
        out.print(
            _text("host protection: ", style="bold yellow")
            + _protection(report.protection)
            + _text(PROTECTION_ADVICE, style="dim")
        )
    failure = report.first_failure
    if failure is not None and report.output.strip():
        tail = "\n".join(report.output.rstrip().splitlines()[-15:])
        out.print(_panel(_text(tail), title="your code printed (last lines)", expand=False))
    if report.passed:
        ran = [s for s in report.stages if s.verdict.value == "pass"]
        skipped = len(report.stages) - len(ran)
        extra = f" ({skipped} skipped)" if skipped else ""
        out.print(
            f"[bold green]✔ All {len(ran)} stages passed[/]{extra} in {report.seconds:.1f} s."
        )
    elif failure is not None:
        failed = sum(s.verdict.value == "fail" for s in report.stages)
        out.print(
            f"[bold red]✘ {failed} of {len(report.stages)} stages failed[/], first: "
            f"{failure.title}. Fix {file_name} and run [bold]trainer check[/] again; "
            f"stuck? [bold]trainer hint {exercise.id}[/]."
        )


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
        answer: str = out.input(prompt)
    except EOFError:
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
    for paragraph in plain.split("\n"):
        lines += textwrap.wrap(paragraph, width - 4) or [""]
    inner = max((len(line) for line in lines), default=0)
    inner = max(inner, len(title) + 2)
    bold = "\x1b[1m" if sys.stdout.isatty() else ""
    reset = "\x1b[0m" if bold else ""
    head = f" {bold}{title}{reset} "
    dashes = inner + 2 - len(title) - 2
    top = "╭" + "─" * (dashes // 2) + head + "─" * (dashes - dashes // 2) + "╮"
    middle = [f"│ {line.ljust(inner)} │" for line in lines]
    return "\n".join([top, *middle, "╰" + "─" * (inner + 2) + "╯"])


def _plain(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def hint(exercise: Exercise, number: int, text: str, last: bool) -> None:
    total = len(exercise.hints)
    _plain(_plain_box(f"Hint {number} of {total}", text))
    if last:
        _plain(
            "That is the last hint. Run trainer check when ready; "
            f"trainer hint {exercise.id} --all shows every hint."
        )
    else:
        _plain(f"Still stuck? trainer hint again for hint {number + 1}.")


def all_hints(exercise: Exercise) -> None:
    for number, text in enumerate(exercise.hints, start=1):
        _plain(_plain_box(f"Hint {number} of {len(exercise.hints)}", text))


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


def quiz_score(exercise: Exercise, score: int, total: int, best: int | None) -> None:
    out.print(
        f"\n[bold]Score: {score} of {total}.[/]"
        + (f" Best so far: {best} of {total}." if best is not None else "")
    )
    if score < total:
        out.print(f"Take it again any time: [bold]trainer quiz {exercise.id}[/].")


def exercise_list(exercises: Sequence[Exercise], state: State) -> None:
    table = _table()
    table.add_column("")
    table.add_column("Exercise", no_wrap=True)
    table.add_column("Title")
    table.add_column("Difficulty")
    table.add_column("Status", no_wrap=True)
    table.add_column("Hints", justify="right")
    table.add_column("Quiz", justify="right")
    table.add_column("Interview", justify="right")
    passed = 0
    for exercise in exercises:
        progress = state.exercises.get(exercise.id, Progress())
        passed += progress.passed
        status = (
            _text("passed", style="green")
            if progress.passed
            else _text("in progress", style="yellow")
            if progress.started
            else _text("not started", style="dim")
        )
        quiz = (
            f"{progress.quiz_best}/{progress.quiz_total}" if progress.quiz_best is not None else "–"
        )
        table.add_row(
            "→" if state.current == exercise.id else "",
            exercise.id,
            exercise.title,
            exercise.difficulty,
            status,
            f"{progress.hints_shown}/{len(exercise.hints)}",
            quiz,
            _best_interview(progress.best_interview),
        )
    out.print(table)
    out.print(f"{passed} of {len(exercises)} passed.")
    if state.interview is not None:
        out.print(f"Interview under way on [bold]{state.interview.exercise}[/].")
    if state.current is None and exercises:
        out.print(
            f"Begin with [bold]trainer start {exercises[0].id}[/] (or [bold]trainer next[/])."
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


def all_passed(count: int) -> None:
    out.print(
        f"[bold green]All {count} exercises passed.[/] Try one against the clock: "
        "[bold]trainer interview[/]."
    )


def reset_done(exercise: Exercise, path: Path, backup: Path | None) -> None:
    if backup is not None:
        out.print(f"Your file was saved to [bold]{_relative(backup)}[/].")
    else:
        out.print("Your file was already the stub: nothing to back up.")
    out.print(f"[bold]{_relative(path)}[/] holds the stub of [bold]{exercise.id}[/] again.")


def solution(exercise: Exercise, source: str, passed: bool) -> None:
    from rich.syntax import Syntax

    title = f"Reference solution: {exercise.id}" + ("" if passed else " (not passed yet)")
    out.print(_panel(Syntax(source, "python", line_numbers=True), title=title, expand=False))
    if exercise.notes:
        out.print(_panel(markdown(exercise.notes), title="What to notice", expand=False))


def interview_started(exercise: Exercise, minutes: float) -> None:
    out.print(
        f"\n[bold magenta]Interview started on {exercise.id}: {minutes:g} minutes.[/] Every "
        "[bold]trainer check[/] shows the time left; hints are allowed but counted. "
        "End early with [bold]trainer interview --stop[/]."
    )


def interview_summary(summary: InterviewSummary) -> None:
    verdict = {
        "passed": "[bold green]passed[/]",
        "stopped": "[yellow]stopped[/]",
        "time up": "[bold red]time up[/]",
    }.get(summary.reason, summary.reason)
    table = _table(title=f"Interview on {summary.exercise}: {verdict}", show_header=False)
    table.add_row("Time taken", f"{_clock(summary.seconds)} of {summary.minutes:g}:00")
    table.add_row("Checks run", str(summary.checks))
    table.add_row("Hints used", str(summary.hints))
    table.add_row("Quiz score", summary.quiz)
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
        console=err,
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
    table = _table(title="Validation", show_lines=True)
    table.add_column("Spec", no_wrap=True)
    table.add_column("Schema")
    table.add_column("Stub fails")
    table.add_column("Solution passes")
    table.add_column("Wrong variants")
    table.add_column("Content")
    table.add_column("Problems", ratio=1)

    def mark(ok: bool) -> Text:
        return _text("✔", style="green") if ok else _text("✘", style="bold red")

    for result in results:
        right = sum(v.ok for v in result.variants)
        loaded = not result.schema
        table.add_row(
            result.spec,
            mark(loaded),
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
            _text("\n".join(result.problems)),
        )
    out.print(table)
    warned = [(r.spec, w) for r in results for w in r.warnings]
    for spec, warning in warned:
        out.print(_text(f"⚠ {spec}: {warning}", style="yellow"))
    bad = [r for r in results if not r.ok]
    if bad:
        out.print(
            f"[bold red]✘ {len(bad)} of {len(results)} specs fall short.[/] Fix what the table says, then run [bold]trainer validate[/] again."
        )
    else:
        out.print(f"[bold green]✔ All {len(results)} specs hold.[/]")
    if warned:
        count = len(warned)
        out.print(
            f"[yellow]⚠ {count} content warning{'s' * (count != 1)}[/] (they do not fail "
            "validation): the rules are in docs/spec-format.md, under Content rules."
        )


def scaffolded(exercise_id: str, files: Sequence[Path], root: Path) -> None:
    for path in files:
        out.print(f"wrote [bold]{_relative(path)}[/]")
    out.print(
        f"Edit them (every field is explained in the spec), then run "
        f"[bold]trainer --exercises-dir {root} validate {_relative(files[0])}[/]."
    )


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


def grade_table(exercise_id: str, grades: Sequence[Grade], junit: Path | None) -> None:
    table = _table(title=f"Grades: {exercise_id}")
    table.add_column("Submission", no_wrap=True)
    table.add_column("Verdict")
    table.add_column("First failure")
    table.add_column("Message", ratio=1)
    styles = {"pass": "bold green", "fail": "bold red", "error": "bold yellow"}
    for item in grades:
        table.add_row(
            _text(_plain_relative(Path(item.submission))),
            _text(item.verdict, style=styles[item.verdict]),
            _text(item.stage),
            _text(item.message),  # never markup: `grad_output[mask]` stays as written
        )
    out.print(table)
    passed = sum(g.verdict == "pass" for g in grades)
    out.print(f"{passed} of {len(grades)} submissions passed.")
    if junit is not None:
        out.print(f"JUnit XML written to [bold]{_relative(junit)}[/].")
