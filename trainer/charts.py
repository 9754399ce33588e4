"""The charts of `trainer stats`: checks per day and completion per track.

Text for a terminal (checks per day with plotille's braille canvas, as
:mod:`trainer.pictures` draws its curves; completion as bars of block
characters), and a matplotlib figure for a notebook. No rich here: the text is
plain, and the caller prints it.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from trainer.stats import Stats

DAYS_HEIGHT = 5  # rows of the checks-per-day plot
_FULL, _EMPTY = "█", "░"
_KEEP = "\u00a0"


def _day_label(day: str) -> str:
    return day[5:]  # MM-DD


def checks_per_day(days: Sequence[tuple[str, int]], width: int = 80) -> list[str]:
    """Vertical bars, one per day (oldest left), with the top count and the first
    and last dates under them."""
    from plotille import Canvas

    top = max([n for _, n in days] + [1])
    gutter = len(str(top))
    per_day = max(min((width - gutter - 3) // max(len(days), 1), 2), 1)
    columns = per_day * len(days)
    canvas = Canvas(columns, DAYS_HEIGHT, xmin=0, ymin=0, xmax=columns * 2, ymax=top)
    for index, (_, count) in enumerate(days):
        for dot in range(max(per_day * 2 - 1, 1)):  # a gap of one dot between bars
            if count:
                x = index * per_day * 2 + dot
                canvas.line(x, 0, x, count)
    lines = []
    for row, drawn in enumerate(canvas.plot(linesep="\n").split("\n")):
        label = str(top) if row == 0 else "0" if row == DAYS_HEIGHT - 1 else ""
        axis = "┤" if label else "│"
        lines.append(f"{label.rjust(gutter)} {axis}{drawn.replace(chr(0x2800), ' ')}".rstrip())
    lines.append(" " * gutter + " └" + "─" * columns)
    first, last = _day_label(days[0][0]), _day_label(days[-1][0])
    lines.append(" " * (gutter + 2) + first + last.rjust(columns - len(first)))
    return lines


def completion_bars(stats: Stats, width: int = 80) -> list[str]:
    """One bar per track: passed of total."""
    titles = max(len(t.title) for t in stats.tracks) if stats.tracks else 0
    bar = max(min(width - titles - 12, 30), 5)
    lines = []
    for track in stats.tracks:
        filled = round(bar * track.passed / track.total) if track.total else 0
        count = f"{track.passed}/{track.total}"
        lines.append(
            f"{track.title.ljust(titles)}  {_FULL * filled}{_EMPTY * (bar - filled)} {count}"
        )
    return lines


def figure(stats: Stats) -> Figure:
    """Both charts as one matplotlib figure; ImportError without matplotlib."""
    from matplotlib.figure import Figure

    drawing = Figure(figsize=(9, 3.4), layout="constrained")
    days, tracks = drawing.subplots(1, 2, width_ratios=(3, 2))
    days.bar([_day_label(d) for d, _ in stats.days], [n for _, n in stats.days], color="tab:blue")
    days.set_title("Checks per day")
    days.tick_params(axis="x", labelrotation=90, labelsize=7)
    titles = [t.title for t in stats.tracks][::-1]
    shares = [t.passed / t.total if t.total else 0.0 for t in stats.tracks][::-1]
    tracks.barh(titles, [1.0] * len(titles), color="0.9")
    tracks.barh(titles, shares, color="tab:green")
    tracks.set_xlim(0, 1)
    tracks.set_title("Completion per track")
    tracks.tick_params(axis="y", labelsize=8)
    return drawing


def duration(seconds: float) -> str:
    """A duration in the largest two units that matter: 3 d 2 h, 2 h 5 min, 25 min."""
    minutes = int(seconds // 60)
    days, hours, minutes = minutes // 1440, minutes // 60 % 24, minutes % 60
    if days:
        return f"{days} d {hours} h" if hours else f"{days} d"
    if hours:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    return f"{minutes} min" if minutes else f"{int(seconds)} s"


def _times(count: float, word: str) -> str:
    return f"{count:g} {word}" + ("" if count == 1 else "s")


def stats_text(stats: Stats, width: int = 80) -> list[str]:
    """The whole of `trainer stats` as plain lines at most ``width`` wide."""
    wrap = textwrap.TextWrapper(width=width, subsequent_indent="    ", break_on_hyphens=False)
    lines = [f"Passed {stats.passed} of {stats.total} exercises.", ""]
    lines += completion_bars(stats, width)
    if stats.empty:
        lines += ["", "No checks yet: `trainer next` starts the first exercise."]
        return lines
    lines += ["", f"Checks per day, the last {len(stats.days)} days:"]
    lines += checks_per_day(stats.days, width)
    lines.append("")
    streak = (
        f"Streak: {_times(stats.streak, 'day')} (longest {_times(stats.longest_streak, 'day')})."
    )
    lines.append(streak)
    if stats.checks_per_pass is not None and stats.hints_per_pass is not None:
        lines.append(
            f"Per pass: {stats.checks_per_pass:.1f} checks and {stats.hints_per_pass:.1f} hints."
        )
    if stats.median_time is not None:
        # No break inside one exercise's time (a no-break space, back to a space after).
        slowest = ", ".join(f"{e} {duration(s)}".replace(" ", _KEEP) for e, s in stats.times[:3])
        lines += [
            line.replace(_KEEP, " ")
            for line in wrap.wrap(
                f"Time from first start to first pass: median {duration(stats.median_time)}; "
                f"longest: {slowest}."
            )
        ]
    if stats.reviews_clean or stats.reviews_failed:
        lines.append(f"Reviews: {stats.reviews_clean} clean, {stats.reviews_failed} failed.")
    if stats.derive_tried:
        lines.append(
            f"Derived on the whiteboard: {stats.derived} of the {stats.derive_tried} "
            "tried (trainer derive --list)."
        )
    if stats.interviews:
        lines += ["", "Interviews:"]
        for interview in stats.interviews[-8:]:
            allowed = duration(interview.minutes * 60)
            verdict = (
                f"passed in {duration(interview.seconds)} of {allowed}"
                if interview.passed
                else f"time up ({allowed})"
                if interview.reason == "time up"
                else f"stopped after {duration(interview.seconds)} of {allowed}"
            )
            if interview.follow_up is not None:
                answered = "answered" if interview.follow_up_answered else "not answered"
                verdict += f"; follow-up {interview.follow_up} {answered}"
            lines += wrap.wrap(f"  {interview.day}  {interview.exercise}: {verdict}")
    if stats.weak_spots:
        lines += ["", "Weak spots (the diagnoses of your failed checks):"]
        for spot in stats.weak_spots:
            lines += wrap.wrap(
                f"  • {spot.words}: {_times(spot.times, 'time')} in "
                f"{_times(spot.exercises, 'exercise')}"
            )
            practise = []
            if spot.question is not None:
                practise.append(f"concepts quiz question {spot.question} (trainer quiz concepts)")
            if spot.exercise is not None:
                practise.append(f"exercise {spot.exercise}")
            if practise:
                lines += wrap.wrap(f"    practise: {'; '.join(practise)}")
    return lines
