"""Draw the checker's pictures of a gradient: in a terminal, or as notebook figures.

The CLI's side of :mod:`trainer.checking.picture_data`: no torch, and nothing
heavy at import. The curve is drawn with plotille (braille dots, no
dependencies, imported on the first curve drawn); the error map is a grid of
shaded, optionally coloured cells drawn here. Text comes back as a string
(ANSI colours only when asked), so the caller decides where it goes: print it
with ``rich.text.Text.from_ansi`` or write it as it is (it has no rich markup).
Figures need matplotlib, which the trainer does not depend on.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from trainer.checking.picture_data import (
    NOT_FINITE,
    CurvePicture,
    ErrorMapPicture,
    Kink,
    Picture,
    read_picture,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# Narrower terminals get no pictures unless asked for (--plot).
MIN_COLUMNS = 60
CURVE_HEIGHT = 12  # rows of the plot itself
MAX_CELL_WIDTH = 4  # characters per error-map cell

_RESET = "\x1b[0m"
# Error-map shades, by how far over the tolerance a cell is (see _shade).
_SHADES = ("·", "░", "▒", "▓", "█")
_SHADE_COLORS = ("2", "33", "31", "1;31", "1;35")
_LEGEND = ("right", "<10²×", "<10⁴×", "<10⁶×", "more or NaN")


def should_draw(
    plot: bool | None,
    *,
    json_output: bool,
    is_terminal: bool,
    columns: int,
    environ: Mapping[str, str],
) -> bool:
    """Whether a command shows pictures.

    ``plot`` is ``--plot`` (True), ``--no-plot`` (False) or neither (None);
    asked for, the answer is always yes (with ``--json``, the caller puts the
    pictures' data in the document rather than drawing them). Otherwise:
    only on an interactive terminal at least ``MIN_COLUMNS`` wide, never with
    ``--json``, under ``NO_COLOR`` or ``TERM=dumb``, nor when piped.
    """
    if plot is not None:
        return plot
    if json_output or not is_terminal:
        return False
    if environ.get("NO_COLOR", "") != "" or environ.get("TERM") == "dumb":
        return False
    return columns >= MIN_COLUMNS


def use_color(*, is_terminal: bool, environ: Mapping[str, str]) -> bool:
    """Colours in a drawn picture: on a terminal, unless ``NO_COLOR`` or ``TERM=dumb``."""
    return is_terminal and environ.get("NO_COLOR", "") == "" and environ.get("TERM") != "dumb"


def _paint(text: str, code: str, color: bool) -> str:
    return f"\x1b[{code}m{text}{_RESET}" if color and text.strip() else text


def _wrap(line: str, width: int) -> list[str]:
    """A line of words cut to the width (a coloured one is left whole)."""
    if "\x1b" in line or len(line) <= width:
        return [line]
    import textwrap  # rarely needed: not at start

    return textwrap.wrap(line, width, subsequent_indent="  ", break_on_hyphens=False)


def _count(picture: Picture, what: str) -> str:
    return f"wrong at {picture['wrong']} of {picture['total']} {what}"


# ---------------------------------------------------------------- curve


def _limits(values: Sequence[float]) -> tuple[float, float]:
    low, high = min(values), max(values)
    if high - low < 1e-12:
        return low - 1.0, high + 1.0
    margin = (high - low) * 0.05
    return low - margin, high + margin


def _nice_ticks(low: float, high: float, count: int) -> list[float]:
    """Round values (steps of 1, 2 or 5 times a power of ten) between low and high."""
    raw = (high - low) / max(count, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.ceil(low / step)
    return [i * step for i in range(first, math.floor(high / step) + 1)]


def _tick(value: float) -> str:
    text = f"{value:.3g}"
    return "0" if text in ("-0", "0") else text


def _off_scale(picture: CurvePicture) -> bool:
    """Whether some of yours lie beyond three times the right curve's height (drawn ↑ ↓)."""
    low, high = _limits(picture["expected"])
    reach = 3 * (high - low)
    return any(y is not None and not low - reach <= y <= high + reach for y in picture["got"])


def _curve_plot(picture: CurvePicture, width: int, color: bool) -> list[str]:
    """The plot with its axes: braille dots from plotille's canvas, axes drawn here."""
    # plotille's Canvas, not its Figure: a Figure imports numpy (0.1 s) to format dates.
    from plotille import Canvas

    name = picture["input"]
    xs, expected = picture["x"], picture["expected"]
    mine = [(x, y) for x, y in zip(xs, picture["got"], strict=True) if y is not None]
    x_low, x_high = _limits(xs)
    # Yours may be far off (a backward dividing by a tiny number): the scale
    # follows the right curve, to three times its height, and yours beyond
    # that is drawn at the edge as an arrow.
    right_low, right_high = _limits(expected)
    floor = right_low - 3 * (right_high - right_low)
    ceiling = right_high + 3 * (right_high - right_low)
    shown = [min(max(y, floor), ceiling) for _, y in mine]
    y_low, y_high = _limits(expected + shown)
    rows = CURVE_HEIGHT
    labels: dict[int, str] = {}
    for value in _nice_ticks(y_low, y_high, 4):
        row = min(int((y_high - value) / (y_high - y_low) * rows), rows - 1)
        labels.setdefault(row, _tick(value))
    gutter = max(len(label) for label in labels.values())
    columns = max(width - gutter - 3 - len(name), 20)
    canvas = Canvas(columns, rows, xmin=x_low, ymin=y_low, xmax=x_high, ymax=y_high)
    paint = (lambda c: c) if color else (lambda _c: None)
    for kink in picture["kinks"]:
        canvas.line(kink["x"], y_low, kink["x"], y_high, color=paint("yellow"))
    for index in range(1, len(xs)):
        canvas.line(
            xs[index - 1], expected[index - 1], xs[index], expected[index], color=paint("cyan")
        )
    if len(xs) == 1:
        canvas.point(xs[0], expected[0], color=paint("cyan"))
    for (x, y), at in zip(mine, shown, strict=True):
        marker = "↑" if y > ceiling else "↓" if y < floor else "•"
        canvas.point(x, at, color=paint("red"), marker=marker)
    lines = []
    for row, drawn in enumerate(canvas.plot(linesep="\n").split("\n")):
        label = labels.get(row, "")
        axis = "┤" if label else "│"
        lines.append(f"{label.rjust(gutter)} {axis}{drawn.replace(chr(0x2800), ' ')}".rstrip())
    ticks, marks = "", ""
    for value in _nice_ticks(x_low, x_high, max(columns // 12, 2)):
        column = min(int((value - x_low) / (x_high - x_low) * columns), columns - 1)
        label = _tick(value)
        start = max(column - len(label) // 2, 0)
        if start > len(ticks) + (1 if ticks else -1) and start + len(label) <= columns:
            ticks = ticks.ljust(start) + label
            marks = marks.ljust(column, "─") + "┬"
    lines.append(" " * gutter + " └" + marks.ljust(columns, "─") + " " + name)
    lines.append(" " * (gutter + 2) + ticks)
    return lines


def _curve_text(picture: CurvePicture, width: int, color: bool) -> str:
    name = picture["input"]
    key = (
        f"{_paint('•', '31', color)} yours ({_count(picture, 'elements')})  "
        f"{_paint('⠤⠤', '36', color)} right"
    )
    if _off_scale(picture):
        key += f"  {_paint('↑↓', '31', color)} yours, off the scale"
    if picture["kinks"]:
        marks = ", ".join(_kink_text(kink) for kink in picture["kinks"])
        key += f"  {_paint('⡇', '33', color)} kinks at {marks}"
    return "\n".join(
        [
            *_wrap(f"Slope of your gradient for `{name}` (gradient ÷ grad_output)", width),
            *_wrap(key, width),
            *_curve_plot(picture, width, color),
            *_wrap(f"→ {picture['pattern']}", width),
        ]
    )


def _kink_text(kink: Kink) -> str:
    """The value, and the spec's name for it unless that is only the number again."""
    try:
        same = float(kink["label"]) == kink["x"]
    except ValueError:
        same = False
    return f"{kink['x']:g}" if same else f"{kink['x']:g} ({kink['label']})"


# ---------------------------------------------------------------- error map


def _shade(cell: str) -> int:
    """0 within tolerance; 1 up to 10²× over; 2 up to 10⁴×; 3 up to 10⁶×; 4 more, or NaN."""
    return 4 if cell == NOT_FINITE else min((int(cell) + 1) // 2, 4)


def _pool_columns(cells: list[str], factor: int) -> list[str]:
    """Cells side by side merged into their worst ("x" sorts after the digits)."""
    return ["".join(max(row[i : i + factor]) for i in range(0, len(row), factor)) for row in cells]


def _shape_text(shape: Sequence[int]) -> str:
    """As torch writes it: (8, 2), (2,), ()."""
    return f"({shape[0]},)" if len(shape) == 1 else "(" + ", ".join(map(str, shape)) + ")"


def _row_labels(picture: ErrorMapPicture) -> list[str]:
    shape, rows = picture["shape"], picture["grid"][0]
    step = picture["block"][0]
    leading = shape[:-1]
    if not leading:
        return [""] * rows
    labels = []
    for row in range(rows):
        first = row * step
        if len(leading) == 1:
            last = min(first + step, leading[0]) - 1
            labels.append(str(first) if last == first else f"{first}-{last}")
            continue
        index = []
        for size in reversed(leading):
            index.append(first % size)
            first //= size
        labels.append(",".join(str(i) for i in reversed(index)))
    return labels


def _column_header(count: int, cell: int, step: int) -> str:
    """Column indices above the cells, every few cells, so that they never touch."""
    longest = len(str((count - 1) * step)) + 1
    every = -(-longest // cell)
    header = ""
    for column in range(0, count, every):
        header = header.ljust(column * cell) + str(column * step)
    return header


def _error_map_text(picture: ErrorMapPicture, width: int, color: bool) -> str:
    cells = picture["cells"]
    labels = _row_labels(picture)
    gutter = max(len(label) for label in labels) + 1
    room = max(width - gutter - 2, 1)
    columns = picture["grid"][1]
    merge = -(-columns // room)  # terminals narrower than the grid: pool further
    if merge > 1:
        cells = _pool_columns(cells, merge)
        columns = len(cells[0])
    cell = max(1, min(MAX_CELL_WIDTH, room // columns))
    step = picture["block"][1] * merge
    worst = picture["worst"]
    about = [
        f"shape {_shape_text(picture['shape'])}",
        "worst " + ("not finite" if worst is None else f"{worst:.3g}× the tolerance"),
    ]
    if picture["block"] != [1, 1] or merge > 1:
        about.append(f"a cell is the worst of {picture['block'][0]} × {step} elements")
    lines = [
        *_wrap(
            f"Where your gradient for `{picture['input']}` is wrong: "
            f"{picture['wrong']} of {picture['total']} elements",
            width,
        ),
        *_wrap("; ".join(about), width),
    ]
    lines.append(" " * (gutter + 1) + _column_header(columns, cell, step))
    lines.append(" " * gutter + "┌" + "─" * (columns * cell) + "┐")
    for label, row in zip(labels, cells, strict=True):
        drawn = "".join(
            _paint(_SHADES[level] * cell, _SHADE_COLORS[level], color)
            for level in (_shade(value) for value in row)
        )
        lines.append(label.rjust(gutter - 1) + " │" + drawn + "│")
    lines.append(" " * gutter + "└" + "─" * (columns * cell) + "┘")
    legend = "  ".join(
        f"{_paint(shade, code, color)} {words}"
        for shade, code, words in zip(_SHADES, _SHADE_COLORS, _LEGEND, strict=True)
    )
    lines += _wrap(f"{legend}  (error ÷ tolerance)", width)
    lines += _wrap(f"→ {picture['pattern']}", width)
    return "\n".join(lines)


# ---------------------------------------------------------------- entry points


def render_text(picture: Picture, *, width: int = 80, color: bool = False) -> str:
    """One picture as terminal text, at most about ``width`` columns wide."""
    if picture["kind"] == "curve":
        return _curve_text(picture, width, color)
    return _error_map_text(picture, width, color)


def render_pictures(data: Sequence[object], *, width: int = 80, color: bool = False) -> str:
    """Every well-formed picture in ``data`` (as received), a blank line apart."""
    pictures = [p for p in (read_picture(item) for item in data) if p is not None]
    return "\n\n".join(render_text(p, width=width, color=color) for p in pictures)


def figure(picture: Picture) -> Figure:
    """A matplotlib figure of the picture; ImportError without matplotlib."""
    from matplotlib.figure import Figure

    drawing = Figure(figsize=(7, 3.6), layout="constrained")
    axes = drawing.add_subplot()
    name = picture["input"]
    if picture["kind"] == "curve":
        mine = [(x, y) for x, y in zip(picture["x"], picture["got"], strict=True) if y is not None]
        axes.plot(picture["x"], picture["expected"], color="tab:blue", label="right")
        axes.scatter(
            [x for x, _ in mine], [y for _, y in mine], color="tab:red", s=12, label="yours"
        )
        for kink in picture["kinks"]:
            axes.axvline(kink["x"], color="tab:orange", linestyle=":", linewidth=1)
        axes.set_xlabel(name)
        axes.set_ylabel("slope (gradient ÷ grad_output)")
        axes.legend(loc="best")
    else:
        from matplotlib import colormaps
        from matplotlib.ticker import MaxNLocator

        levels = [[_shade(value) for value in row] for row in picture["cells"]]
        shades = colormaps["magma_r"].resampled(len(_SHADES))
        image = axes.imshow(levels, cmap=shades, vmin=-0.5, vmax=len(_SHADES) - 0.5, aspect="auto")
        bar = drawing.colorbar(image, ax=axes, ticks=range(len(_SHADES)))
        bar.ax.set_yticklabels(list(_LEGEND))
        bar.set_label("error ÷ tolerance")
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
        axes.yaxis.set_major_locator(MaxNLocator(integer=True))
        axes.set_xlabel(f"last dimension (× {picture['block'][1]} per cell)")
        axes.set_ylabel(f"rows (× {picture['block'][0]} per cell)")
    axes.set_title("\n".join(_wrap(f"`{name}`: {picture['pattern']}", 70)), fontsize=10)
    return drawing


class TextPicture:
    """A picture as text, shown as it is by a notebook or a REPL."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self.text)


def notebook_view(picture: Picture, *, width: int = 80) -> Figure | TextPicture:
    """For a notebook: a matplotlib figure where matplotlib is installed, else the text."""
    try:
        return figure(picture)
    except ImportError:
        return TextPicture(render_text(picture, width=width))
