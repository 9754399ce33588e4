"""Everything the user sees: the only module that talks to rich."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.markdown import Markdown
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from trainer.checking.report import CheckReport, Verdict
from trainer.spec import Exercise, QuizQuestion
from trainer.state import Progress, State
from trainer.workspace import StartResult

out = Console(highlight=False)
err = Console(stderr=True, highlight=False)

_VERDICT_STYLE = {
    Verdict.PASS: ("✔ pass", "bold green"),
    Verdict.FAIL: ("✘ fail", "bold red"),
    Verdict.SKIP: ("– skip", "dim"),
}


def is_interactive() -> bool:
    return sys.stdin.isatty() and sys.stdout.isatty()


def error(message: str) -> None:
    # soft_wrap: one line, whatever the width, so it can be grepped and copied.
    err.print(Text("error: ", style="bold red") + Text(message), soft_wrap=True)


def notice(message: str) -> None:
    err.print(Text("note: ", style="bold yellow") + Text(message), soft_wrap=True)


def print_json(document: str) -> None:
    # Plain print: exactly one JSON document, no markup or wrapping.
    sys.stdout.write(document + "\n")


def _relative(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def started(exercise: Exercise, result: StartResult) -> None:
    out.print(Panel(Markdown(exercise.statement), title=f"[bold]{exercise.title}[/]", expand=False))
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


def check_report(report: CheckReport, exercise: Exercise) -> None:
    file_name = Path(report.file).name
    out.print(
        f"Checking [bold]{file_name}[/] against [bold]{exercise.id}[/] "
        f"[dim](seed {report.seed}, file sha256 {report.file_sha256[:12]})[/]"
    )
    table = Table(show_lines=True, expand=True)
    table.add_column("Stage", no_wrap=True)
    table.add_column("Verdict", no_wrap=True)
    table.add_column("Details", ratio=1)
    for stage in report.stages:
        label, style = _VERDICT_STYLE[stage.verdict]
        body = Text(stage.message)
        for line in stage.details:
            body.append("\n" + line, style="dim" if stage.verdict is not Verdict.FAIL else "")
        table.add_row(stage.title, Text(label, style=style), body)
    out.print(table)
    for note in report.notes:
        out.print(Text("note: ", style="bold yellow") + Text(note))
    failure = report.first_failure
    if failure is not None and report.output.strip():
        tail = "\n".join(report.output.rstrip().splitlines()[-15:])
        out.print(Panel(Text(tail), title="your code printed (last lines)", expand=False))
    if report.passed:
        ran = [s for s in report.stages if s.verdict is Verdict.PASS]
        skipped = len(report.stages) - len(ran)
        extra = f" ({skipped} skipped)" if skipped else ""
        out.print(
            f"[bold green]✔ All {len(ran)} stages passed[/]{extra} in {report.seconds:.1f} s."
        )
    elif failure is not None:
        failed = sum(s.verdict is Verdict.FAIL for s in report.stages)
        out.print(
            f"[bold red]✘ {failed} of {len(report.stages)} stages failed[/], first: "
            f"{failure.title}. Fix {file_name} and run [bold]trainer check[/] again; "
            f"stuck? [bold]trainer hint {exercise.id}[/]."
        )


def after_pass(exercise: Exercise) -> None:
    out.print(f"Lock in the concepts: [bold]trainer quiz {exercise.id}[/].")


def ask_yes_no(question: str) -> bool:
    answer = ask(f"{question} [Y/n] ")
    return answer is not None and answer.strip().lower() in ("", "y", "yes")


def ask(prompt: str) -> str | None:
    """One line from the user, or None at end of input."""
    try:
        return out.input(prompt)
    except EOFError:
        return None


def hint(exercise: Exercise, number: int, text: str, last: bool) -> None:
    total = len(exercise.hints)
    out.print(Panel(Markdown(text), title=f"Hint {number} of {total}", expand=False))
    if last:
        out.print(
            f"That is the last hint. Run [bold]trainer check[/] when ready; "
            f"[bold]trainer hint {exercise.id} --all[/] shows every hint."
        )
    else:
        out.print(f"Still stuck? [bold]trainer hint[/] again for hint {number + 1}.")


def all_hints(exercise: Exercise) -> None:
    for number, text in enumerate(exercise.hints, start=1):
        out.print(
            Panel(Markdown(text), title=f"Hint {number} of {len(exercise.hints)}", expand=False)
        )


def quiz_question(number: int, total: int, question: QuizQuestion) -> None:
    out.print(f"\n[bold]Question {number} of {total}.[/] {question.question}")
    for index, choice in enumerate(question.choices, start=1):
        out.print(f"  {index}. {choice}")


def quiz_feedback(question: QuizQuestion, correct: bool) -> None:
    if correct:
        out.print("[bold green]✔ Right.[/] " + question.explanation)
    else:
        answer = question.choices[question.answer - 1]
        out.print(
            f"[bold red]✘ Not quite.[/] The answer is {question.answer}. {answer}\n{question.explanation}"
        )


def quiz_score(exercise: Exercise, score: int, total: int, best: int | None) -> None:
    out.print(
        f"\n[bold]Score: {score} of {total}.[/]"
        + (f" Best so far: {best} of {total}." if best is not None else "")
    )
    if score < total:
        out.print(f"Take it again any time: [bold]trainer quiz {exercise.id}[/].")


def exercise_list(exercises: Sequence[Exercise], state: State) -> None:
    table = Table()
    table.add_column("")
    table.add_column("Exercise", no_wrap=True)
    table.add_column("Title")
    table.add_column("Difficulty")
    table.add_column("Status", no_wrap=True)
    table.add_column("Hints", justify="right")
    table.add_column("Quiz", justify="right")
    passed = 0
    for exercise in exercises:
        progress = state.exercises.get(exercise.id, Progress())
        passed += progress.passed
        status = (
            Text("passed", style="green")
            if progress.passed
            else Text("in progress", style="yellow")
            if progress.started
            else Text("not started", style="dim")
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
        )
    out.print(table)
    out.print(f"{passed} of {len(exercises)} passed.")
    if state.current is None:
        out.print("Begin with [bold]trainer start sigmoid[/].")
