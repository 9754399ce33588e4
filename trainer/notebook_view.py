"""What the notebook shows: HTML for Jupyter and Colab, plain text everywhere else.

Returns strings and small display objects; nothing here prints, and nothing
imports rich or IPython. Colours sit on badges with white text, so they read the
same on light and dark themes, and each verdict also has its own symbol. The
pictures of a wrong gradient are drawn by :mod:`trainer.pictures`.
"""

from __future__ import annotations

import contextlib
import html
import io
import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from trainer.bugs import bug_message
from trainer.checking.report import duration
from trainer.spec import Exercise, FollowUp, QuizQuestion
from trainer.state import Progress, State

if TYPE_CHECKING:
    from trainer.checking.report import CheckReport, StageResult, VerdictSentence
    from trainer.interview import InterviewSummary
    from trainer.stats import Stats


class Report(Protocol):
    """What is drawn of :class:`trainer.api.Report`."""

    raw: CheckReport
    warm: bool
    advice: str

    @property
    def passed(self) -> bool: ...
    @property
    def stages(self) -> list[StageResult]: ...
    @property
    def seconds(self) -> float: ...
    @property
    def failure(self) -> StageResult | None: ...
    @property
    def verdict_sentence(self) -> VerdictSentence: ...


# Background colours with a contrast of 4.5:1 or more against white text.
_BADGE = {
    "pass": ("✔ pass", "#1a7f37"),
    "fail": ("✘ fail", "#cf222e"),
    "skip": ("– skip", "#6e7781"),
}
_BADGE_STYLE = (
    "display:inline-block;padding:0 .45em;border-radius:.3em;color:#fff;"
    "font-weight:600;white-space:nowrap;background-color:{colour}"
)
# Jupyter's own table style right-aligns cells and stripes rows; override the first,
# keep the stripes (they follow the theme). Borders are grey at half strength.
_CELL = (
    "text-align:left;vertical-align:top;padding:.25em .6em;border:1px solid rgba(128,128,128,.45)"
)
_CODE = re.compile(r"`([^`]+)`")
WIDTH = 100


@dataclass(frozen=True)
class Shown:
    """Something to display: Markdown or HTML for notebooks, and text for terminals."""

    text: str
    markdown: str | None = None
    html: str | None = None

    def __repr__(self) -> str:
        return self.text

    def _repr_markdown_(self) -> str | None:
        return self.markdown

    def _repr_html_(self) -> str | None:
        return self.html


def _inline(text: str) -> str:
    """Escape ``text`` for HTML; `code` spans become <code>."""
    return _CODE.sub(lambda m: f"<code>{m.group(1)}</code>", html.escape(text))


def _badge(verdict: str) -> str:
    label, colour = _BADGE[verdict]
    return f'<span style="{_BADGE_STYLE.format(colour=colour)}">{label}</span>'


def _summary(report: Report) -> tuple[bool, str]:
    """The verdict sentence (:meth:`~trainer.checking.report.CheckReport.verdict_sentence`)
    with where the check ran, and whether it is a pass."""
    sentence = report.verdict_sentence
    how = "warm checker" if report.warm else "cold start"
    bug = report.raw.bug
    if bug is not None:  # no verdict: a bug of ours stopped the check
        return False, bug_message(bug.where, bug.path, bug.error)
    if sentence.passed:
        return True, f"{sentence} ({how})."
    return False, f"{sentence} ({duration(report.seconds)}, {how})."


def report_html(report: Report) -> str:
    raw = report.raw
    rows = []
    for stage in report.stages:
        body = _inline(stage.message)
        if stage.details:
            lines = html.escape("\n".join(stage.details))
            body += f'<pre style="margin:.3em 0 0;white-space:pre-wrap">{lines}</pre>'
        rows.append(
            f'<tr><td style="{_CELL};white-space:nowrap">{html.escape(stage.title)}</td>'
            f'<td style="{_CELL}">{_badge(stage.verdict.value)}</td>'
            f'<td style="{_CELL}">{body}</td></tr>'
        )
    passed, sentence = _summary(report)
    verdict = _badge("pass" if passed else "fail")
    parts = [
        '<div class="trainer-report">',
        f"<div>Checked <b>{html.escape(Path(raw.file).name)}</b> against "
        f"<b>{html.escape(raw.exercise)}</b> "
        f'<span style="opacity:.7">(seed {raw.seed}, file sha256 {raw.file_sha256[:12]})</span></div>',
        '<table style="border-collapse:collapse;margin:.4em 0">',
        f'<thead><tr><th style="{_CELL}">Stage</th><th style="{_CELL}">Verdict</th>'
        f'<th style="{_CELL}">Details</th></tr></thead>',
        "<tbody>",
        *rows,
        "</tbody></table>",
    ]
    for note in raw.notes:
        parts.append(f"<div><b>note:</b> {_inline(note)}</div>")
    if not passed and raw.output.strip():
        tail = html.escape("\n".join(raw.output.rstrip().splitlines()[-15:]))
        parts.append(
            "<details><summary>Your code printed (last lines)</summary>"
            f'<pre style="white-space:pre-wrap">{tail}</pre></details>'
        )
    parts.append(f"<div>{verdict} <b>{html.escape(sentence)}</b> {_inline(report.advice)}</div>")
    parts.append("</div>")
    return "\n".join(parts)


def report_text(report: Report) -> str:
    raw = report.raw
    lines = [
        f"Checked {Path(raw.file).name} against {raw.exercise} "
        f"(seed {raw.seed}, file sha256 {raw.file_sha256[:12]})"
    ]
    width = max((len(s.title) for s in report.stages), default=0)
    indent = " " * (width + 12)  # under the message: "  ✔ pass  <title>  "
    for stage in report.stages:
        label = _BADGE[stage.verdict.value][0]
        head = f"  {label}  {stage.title.ljust(width)}  "
        wrapped = textwrap.wrap(stage.message, WIDTH - len(indent)) or [""]
        lines.append(head + wrapped[0])
        lines += [indent + line for line in wrapped[1:]]
        lines += [indent + line for line in stage.details]
    for note in raw.notes:
        lines.append(f"note: {note}")
    passed, sentence = _summary(report)
    if not passed and raw.output.strip():
        lines.append("Your code printed (last lines):")
        lines += ["  " + line for line in raw.output.rstrip().splitlines()[-15:]]
    lines.append(f"{'✔' if passed else '✘'} {sentence} {report.advice.replace('`', '')}".rstrip())
    return "\n".join(lines)


class FigureView:
    """A matplotlib figure as a PNG, whatever the kernel's plotting backend."""

    def __init__(self, figure: Any, text: str) -> None:
        self.figure = figure
        self.text = text

    def _repr_png_(self) -> bytes:
        buffer = io.BytesIO()
        self.figure.savefig(buffer, format="png", dpi=100)
        return buffer.getvalue()

    def __repr__(self) -> str:
        return self.text


def picture_views(stages: Sequence[StageResult]) -> list[object]:
    """The pictures of the failing stages: figures where matplotlib is installed, else text."""
    from trainer.checking.picture_data import read_picture
    from trainer.pictures import TextPicture, notebook_view, render_text

    views: list[object] = []
    for stage in stages:
        if stage.verdict.value != "fail":
            continue
        for data in stage.pictures:
            picture = read_picture(data)
            if picture is None:
                continue
            shown = notebook_view(picture, width=WIDTH)
            if not isinstance(shown, TextPicture):
                shown = FigureView(shown, render_text(picture, width=WIDTH))
            views.append(shown)
    return views


# Start, hints, solution, list, quiz ---------------------------------------------------


def _md(markdown: str) -> Shown:
    """Markdown for notebooks (the frontend renders it, maths and lists included); as text too."""
    return Shown(text=markdown, markdown=markdown)


def started(
    exercise: Exercise, shown_path: str, cell: str, kept_edits: bool, backup: str | None
) -> list[Shown]:
    """The statement, where the scratch file is, the next steps and the cell to copy."""
    if kept_edits:
        where = (
            f"`{shown_path}` already has your edits: the new cell holds them. To start over: "
            f"`%trainer start {exercise.id} --force` (your file is backed up first)."
        )
    elif backup is not None:
        where = f"Your previous file was saved to `{backup}`. A fresh stub is in `{shown_path}`."
    else:
        where = f"Your scratch file: `{shown_path}`"
    steps = (
        f"1. Write `backward()` in `{exercise.class_name}`, in the new cell below "
        f"(it starts with `%%trainer check {exercise.id}`).\n"
        "2. Run that cell: it is checked in an isolated process, never in this kernel.\n"
        f"3. Stuck? `%trainer hint {exercise.id}` reveals one hint at a time."
    )
    statement = f"### {exercise.title}\n\n{exercise.statement.strip()}\n\n{where}\n\n**Next steps**\n\n{steps}"
    copy = Shown(
        text=f"If no new cell appeared below, copy this into one:\n\n{cell}",
        html="<details><summary>No new cell below? Copy this into one</summary>"
        f"<pre>{html.escape(cell)}</pre></details>",
    )
    return [_md(statement), copy]


def _quote(text: str) -> str:
    return "\n".join(f"> {line}" if line else ">" for line in text.strip().splitlines())


def hint(exercise: Exercise, number: int, text: str, last: bool) -> Shown:
    after = (
        f"That is the last hint; `%trainer hint {exercise.id} --all` shows every hint."
        if last
        else f"Still stuck? `%trainer hint {exercise.id}` again for hint {number + 1}."
    )
    return _md(f"**Hint {number} of {len(exercise.hints)}**\n\n{_quote(text)}\n\n{after}")


def all_hints(exercise: Exercise) -> Shown:
    total = len(exercise.hints)
    return _md(
        "\n\n".join(
            f"**Hint {n} of {total}**\n\n{_quote(t)}" for n, t in enumerate(exercise.hints, 1)
        )
    )


def solution(exercise: Exercise, source: str, passed: bool) -> Shown:
    title = f"Reference solution: {exercise.id}" + ("" if passed else " (not passed yet)")
    markdown = f"**{title}**\n\n```python\n{source.rstrip()}\n```"
    if exercise.notes.strip():
        markdown += f"\n\n**What to notice**\n\n{exercise.notes.strip()}"
    return _md(markdown)


def derivation(exercise_id: str, text: str, passed: bool = True) -> Shown:
    """An exercise's worked derivation (under its first passing check, and
    `%trainer explain`): lines of math as the author laid them out (preformatted, never
    reflowed)."""
    title = f"How the gradient is derived: {exercise_id}" + ("" if passed else " (not passed yet)")
    return Shown(
        text=f"{title}\n\n{text}",
        html=f"<p><b>{html.escape(title)}</b></p><pre>{html.escape(text)}</pre>",
    )


def exercise_list(exercises: Sequence[Exercise], state: State) -> list[Shown]:
    from trainer.follow_ups import status as follow_ups

    head = [
        "",
        "Exercise",
        "Title",
        "Difficulty",
        "Status",
        "Follow-ups",
        "Hints",
        "Quiz",
        "Interview",
    ]
    rows: list[list[str]] = []
    passed = 0
    for exercise in exercises:
        progress = state.exercises.get(exercise.id, Progress())
        passed += progress.passed
        status = (
            "✔ passed" if progress.passed else "in progress" if progress.started else "not started"
        )
        quiz = (
            f"{progress.quiz_best}/{progress.quiz_total}" if progress.quiz_best is not None else "–"
        )
        best = progress.best_interview
        interview = "–" if not best else ("✔" if best.get("passed") else "✘")
        rows.append(
            [
                "→" if state.current == exercise.id else "",
                exercise.id,
                exercise.title,
                exercise.difficulty,
                status,
                follow_ups(exercise, progress).tally or "",
                f"{progress.hints_shown}/{len(exercise.hints)}",
                quiz,
                interview,
            ]
        )
    cells = "".join(f'<th style="{_CELL}">{html.escape(h)}</th>' for h in head)
    body = "".join(
        "<tr>" + "".join(f'<td style="{_CELL}">{html.escape(c)}</td>' for c in row) + "</tr>"
        for row in rows
    )
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    text = "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
        for r in [head, *rows]
    )
    table = Shown(
        text=text,
        html=f'<table style="border-collapse:collapse"><thead><tr>{cells}</tr></thead>'
        f"<tbody>{body}</tbody></table>",
    )
    footer = f"{passed} of {len(exercises)} passed."
    if state.current is None and exercises:
        footer += f" Begin with `%trainer start {exercises[0].id}`."
    return [table, _md(footer)]


def follow_up_question(exercise: Exercise, follow_up: FollowUp, number: int) -> Shown:
    """`%trainer followup`: the question, its hints, and how it is checked from now on."""
    from trainer.follow_ups import stage_title

    hints = "\n\n".join(f"Hint {n}: {text}" for n, text in enumerate(follow_up.hints, 1))
    return _md(
        f"**Follow-up {number} of {len(exercise.follow_ups)}: {follow_up.id}**\n\n"
        f"{_quote(follow_up.question)}\n\n{hints}\n\n"
        f"From now on `%trainer check {exercise.id}` (and a `%%trainer check {exercise.id}` "
        f'cell) grades it too, as the stage "{stage_title(follow_up)}". Change your code, '
        "then check."
    )


def follow_up_list(exercise: Exercise, passed: Sequence[str], active: str | None) -> Shown:
    """`%trainer followup --list`: every follow-up, passed or taken up."""
    lines = []
    for number, follow_up in enumerate(exercise.follow_ups, start=1):
        mark = "passed" if follow_up.id in passed else "taken up" if follow_up.id == active else ""
        lines.append(
            f"{number}. **{follow_up.id}**"
            + (f" ({mark})" if mark else "")
            + f": {follow_up.question}"
        )
    return _md("\n".join(lines))


def no_follow_up(exercise: Exercise, passed: int) -> Shown:
    if not exercise.follow_ups:
        return _md(f"The interviewer has no follow-up for {exercise.id}.")
    return _md(f"Every follow-up of {exercise.id} is passed ({passed} of {passed}).")


def quiz_question(number: int, total: int, question: QuizQuestion) -> Shown:
    choices = "\n".join(f"{i}. {c}" for i, c in enumerate(question.choices, 1))
    return _md(f"**Question {number} of {total}.** {question.question}\n\n{choices}")


def quiz_feedback(question: QuizQuestion, correct: bool) -> Shown:
    if correct:
        return _md(f"✔ **Right.** {question.explanation}")
    answer = question.choices[question.answer - 1]
    return _md(
        f"✘ **Not quite.** The answer is {question.answer}. {answer}\n\n{question.explanation}"
    )


def quiz_score(exercise: Exercise, score: int, total: int, best: int | None) -> Shown:
    line = f"**Score: {score} of {total}.**"
    if best is not None:
        line += f" Best so far: {best} of {total}."
    if score < total:
        line += f" Take it again any time: `%trainer quiz {exercise.id}`."
    return _md(line)


def message(markdown: str) -> Shown:
    return _md(markdown)


def interview_summary(summary: InterviewSummary) -> Shown:
    """An interview that ended (its time ran out while no command ran), as the CLI says it."""
    from trainer.interview import format_duration

    taken = f"{format_duration(summary.seconds)} of {format_duration(summary.minutes * 60)}"
    follow_up = (
        f"; follow-up {summary.follow_up_words}" if summary.follow_up_words is not None else ""
    )
    return _md(
        f"**Interview on {summary.exercise}: {summary.reason}.** Time taken: {taken}; "
        f"checks run: {summary.checks}; hints used: {summary.hints}{follow_up}."
    )


def stats(numbers: Stats) -> list[object]:
    """`%trainer stats`: the text `trainer stats` prints, then its charts as a figure
    where matplotlib is installed."""
    from trainer.charts import figure, stats_text

    text = "\n".join(stats_text(numbers, WIDTH))
    shown: list[object] = [Shown(text=text, html=f"<pre>{html.escape(text)}</pre>")]
    if numbers.empty:
        return shown
    with contextlib.suppress(ImportError):  # without matplotlib, the text has the charts
        shown.append(FigureView(figure(numbers), "(the charts above, as a figure)"))
    return shown
