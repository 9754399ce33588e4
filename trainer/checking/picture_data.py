"""Pictures of a gradient: the plain data the checker sends and the CLI draws.

No torch here: the CLI reads pictures without it. The checker makes them
(:mod:`trainer.checking.trusted.pictures`); the CLI draws them
(:mod:`trainer.pictures`). A picture is a JSON object, a few kB at most, of
one of two kinds. Every number is finite; ``null`` stands for "no value".

``curve`` (element-wise exercises): the local derivative, gradient ÷ upstream
gradient, against the input value::

    {"kind": "curve", "version": 1,
     "input": "x",                      # the forward parameter's name
     "x": [-2.97, ...],                 # input values, ascending, at most 80
     "expected": [0.0, ...],            # the reference's local derivative there
     "got": [1.0, null, ...],           # the learner's (null: not finite)
     "kinks": [{"x": 0.5, "label": "clip_val"}],   # where the slope jumps
     "wrong": 61, "total": 100,         # elements outside the tolerance, of those drawn from
     "pattern": "right only where 0 < x < 0.5: a missing mask?"}

Each of the (at most 80) points stands for a bin of neighbouring input values
and is that bin's worst element (the one where the two derivatives differ
most), so downsampling never hides a wrong element. Elements whose upstream
gradient is nearly zero are left out (dividing by it says nothing).

``error_map`` (matrices and batches): where the gradient is wrong::

    {"kind": "error_map", "version": 1,
     "input": "weight",
     "shape": [4, 4],                   # the gradient's shape (broadcast, if the learner's differs)
     "grid": [4, 4],                    # rows × columns: all dimensions but the last, × the last
     "block": [1, 1],                   # elements per cell, down × across (max-pooled)
     "cells": ["0656", "5055", ...],    # a row of cells per string, a character per cell:
                                        # "0" within tolerance; "1" to "9" when the worst error
                                        # is 10^(d-1) to 10^d times the tolerance (9: or more);
                                        # "x" when it is not finite (NaN, inf)
     "worst": 312000.0,                 # the largest error ÷ tolerance (null: not finite)
     "wrong": 12, "total": 16,          # elements outside the tolerance
     "pattern": "right only on the diagonal: transposed?"}

The tolerance of an element is ``atol + rtol · |expected|``, as the checker's.
The grid is at most 20 × 60 cells. ``pattern`` is one line: what the picture
shows and, after a colon, the classic mistake it suggests (the names of
:mod:`trainer.checking.trusted.diagnosis`), or just what it shows.
"""

from __future__ import annotations

import math
from typing import Literal, TypedDict

FORMAT_VERSION = 1
CURVE_POINTS = 80
MAP_ROWS = 20
MAP_COLUMNS = 60
NOT_FINITE = "x"  # the cell of an error that is NaN or infinite
CELL_CHARACTERS = "0123456789" + NOT_FINITE


class Kink(TypedDict):
    x: float
    label: str


class CurvePicture(TypedDict):
    kind: Literal["curve"]
    version: int
    input: str
    x: list[float]
    expected: list[float]
    got: list[float | None]
    kinks: list[Kink]
    wrong: int
    total: int
    pattern: str


class ErrorMapPicture(TypedDict):
    kind: Literal["error_map"]
    version: int
    input: str
    shape: list[int]
    grid: list[int]
    block: list[int]
    cells: list[str]
    worst: float | None
    wrong: int
    total: int
    pattern: str


Picture = CurvePicture | ErrorMapPicture


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _numbers(value: object, optional: bool = False) -> bool:
    return isinstance(value, list) and all(_number(v) or (optional and v is None) for v in value)


def _counts(data: dict[str, object]) -> bool:
    wrong, total = data.get("wrong"), data.get("total")
    return (
        isinstance(wrong, int)
        and isinstance(total, int)
        and 0 <= wrong <= total
        and isinstance(data.get("input"), str)
        and isinstance(data.get("pattern"), str)
    )


def _curve(data: dict[str, object]) -> bool:
    x, expected, got, kinks = (data.get(k) for k in ("x", "expected", "got", "kinks"))
    return (
        _numbers(x)
        and _numbers(expected)
        and _numbers(got, optional=True)
        and isinstance(x, list)
        and isinstance(expected, list)
        and isinstance(got, list)
        and 1 <= len(x) == len(expected) == len(got) <= CURVE_POINTS
        and isinstance(kinks, list)
        and all(
            isinstance(k, dict) and _number(k.get("x")) and isinstance(k.get("label"), str)
            for k in kinks
        )
    )


def _error_map(data: dict[str, object]) -> bool:
    shape, grid, block, cells = (data.get(k) for k in ("shape", "grid", "block", "cells"))
    if not (
        isinstance(shape, list)
        and all(isinstance(d, int) and d >= 0 for d in shape)
        and isinstance(grid, list)
        and isinstance(block, list)
        and len(grid) == len(block) == 2
        and all(isinstance(d, int) and d >= 1 for d in [*grid, *block])
        and grid[0] <= MAP_ROWS
        and grid[1] <= MAP_COLUMNS
        and (_number(data.get("worst")) or data.get("worst") is None)
        and isinstance(cells, list)
        and len(cells) == grid[0]
    ):
        return False
    return all(
        isinstance(row, str) and len(row) == grid[1] and all(c in CELL_CHARACTERS for c in row)
        for row in cells
    )


def read_picture(data: object) -> Picture | None:
    """``data`` as a picture, or None when it is not one this version can draw."""
    if not isinstance(data, dict) or data.get("version") != FORMAT_VERSION or not _counts(data):
        return None
    if data.get("kind") == "curve" and _curve(data):
        return data  # type: ignore[return-value]
    if data.get("kind") == "error_map" and _error_map(data):
        return data  # type: ignore[return-value]
    return None
