"""Pictures of a wrong gradient: made from real checks, drawn without torch.

The pictures here come from the bundled wrong variants, run on the plans the
checker builds for their exercises. The text drawings at 80 columns are kept
in tests/snapshots/ and compared exactly; after a deliberate change, write
them again with ``TRAINER_UPDATE_SNAPSHOTS=1``.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

from trainer.catalog import Catalog, wrong_variant_path
from trainer.checking.picture_data import MAP_COLUMNS, MAP_ROWS, read_picture
from trainer.checking.trusted.pictures import curve, error_map, gradient_pictures
from trainer.checking.trusted.plan import Run, build_plan
from trainer.pictures import (
    TextPicture,
    notebook_view,
    render_pictures,
    render_text,
    should_draw,
    use_color,
)
from trainer.spec import ScalarParam, TensorParam

# What check --plot and plot draw, on the worker's warm checking server.
pytestmark = pytest.mark.usefixtures("warm_commands")


REPO = Path(__file__).resolve().parent.parent
SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"
UPDATE = os.environ.get("TRAINER_UPDATE_SNAPSHOTS") == "1"


class _Ctx:
    """What a backward reads from autograd's ctx, for calling a Function directly."""

    def __init__(self, needs: Sequence[bool]) -> None:
        self.needs_input_grad = tuple(needs)
        self.saved_tensors: tuple[torch.Tensor, ...] = ()

    def save_for_backward(self, *tensors: torch.Tensor) -> None:
        self.saved_tensors = tensors


def _load(exercise_id: str, variant: str) -> ModuleType:
    exercise = Catalog.default().get(exercise_id)
    path = wrong_variant_path(exercise, variant)
    spec = importlib.util.spec_from_file_location(f"wrong_{exercise_id}_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _wrong_gradients(exercise_id: str, variant: str, run: Run) -> dict[str, object]:
    """The variant's backward called directly, as the contract stage calls it (no autograd sums)."""
    exercise = Catalog.default().get(exercise_id)
    function = getattr(_load(exercise_id, variant), exercise.class_name)
    args = run.fresh_args()
    ctx = _Ctx([isinstance(a, torch.Tensor) for a in args])
    with torch.no_grad():
        function.forward(ctx, *args)
        grads = function.backward(ctx, *run.upstream)
    grads = grads if isinstance(grads, tuple) else (grads,)
    return dict(zip(exercise.param_names, grads, strict=False))


@functools.cache
def _float32_runs(exercise_id: str) -> list[Run]:
    plan = build_plan(Catalog.default().get(exercise_id), seed=0)
    return [run for run in plan.runs if run.dtype == torch.float32]


def _kinks(exercise_id: str, run: Run, name: str) -> list[tuple[float, str]]:
    exercise = Catalog.default().get(exercise_id)
    scalars = {
        p.name: v for p, v in zip(run.params, run.args, strict=True) if isinstance(p, ScalarParam)
    }
    param = next(p for p in exercise.parameters if p.name == name)
    assert isinstance(param, TensorParam)
    return [(float(eval(expr, {}, dict(scalars))), expr) for expr in param.kinks]


def _flat(tensors: Sequence[object]) -> torch.Tensor:
    return torch.cat([t.detach().reshape(-1) for t in tensors if isinstance(t, torch.Tensor)])


def _sigmoid_twice_the_gradient() -> dict[str, Any]:
    # Every float32 run of the plan at once: sigmoid has no scalar arguments.
    runs = _float32_runs("sigmoid")
    got = [_wrong_gradients("sigmoid", "twice_the_gradient.py", run)["x"] for run in runs]
    picture = curve(
        "x",
        _flat([run.args[0] for run in runs]),
        _flat([run.expected_grads["x"] for run in runs]),
        _flat(got),
        _flat([run.upstream[0] for run in runs]),
        rtol=runs[0].tolerance.rtol,
        atol=runs[0].tolerance.atol,
    )
    assert picture is not None
    return dict(picture)


def _clipped_relu_no_mask() -> dict[str, Any]:
    # One run: the kinks move with clip_val, which differs between cases.
    run = _float32_runs("clipped_relu")[0]
    pictures = gradient_pictures(
        {p.name: a for p, a in zip(run.params, run.args, strict=True)},
        run.expected_grads,
        _wrong_gradients("clipped_relu", "no_mask.py", run),
        run.upstream[0],
        elementwise=True,
        rtol=run.tolerance.rtol,
        atol=run.tolerance.atol,
        kinks={"input_tensor": _kinks("clipped_relu", run, "input_tensor")},
    )
    assert [p["kind"] for p in pictures] == ["curve"]
    return dict(pictures[0])


def _linear(variant: str, case: int, name: str) -> dict[str, Any]:
    run = _float32_runs("linear")[case]
    pictures = gradient_pictures(
        {p.name: a for p, a in zip(run.params, run.args, strict=True)},
        run.expected_grads,
        _wrong_gradients("linear", variant, run),
        run.upstream[0],
        elementwise=False,
        rtol=run.tolerance.rtol,
        atol=run.tolerance.atol,
    )
    by_input = {p["input"]: dict(p) for p in pictures}
    assert list(by_input) == [name], "only the wrong gradient gets a picture"
    return by_input[name]


PICTURES: dict[str, Callable[[], dict[str, Any]]] = {
    # a constant factor: 2 σ(x)(1 − σ(x))
    "sigmoid_twice_the_gradient": _sigmoid_twice_the_gradient,
    # a missing mask: grad_output passed through everywhere
    "clipped_relu_no_mask": _clipped_relu_no_mask,
    # a transposed weight gradient, on the case where weight is square (4 × 4)
    "linear_grad_weight_transposed": lambda: _linear("grad_weight_transposed.py", 2, "weight"),
    # an unsummed bias gradient, (8, 2) for a bias of (2,)
    "linear_bias_not_summed_over_batch": lambda: _linear(
        "bias_not_summed_over_batch.py", 3, "bias"
    ),
    # a mean where a sum belongs: a factor of 1/8 in every element
    "linear_bias_mean_over_batch": lambda: _linear("bias_mean_over_batch.py", 3, "bias"),
}

PATTERNS = {
    "sigmoid_twice_the_gradient": "off by the same factor (2×) everywhere: a constant factor?",
    "clipped_relu_no_mask": "right only where 0 < input_tensor < 0.5: a missing mask?",
    "linear_grad_weight_transposed": "right only on the diagonal: transposed?",
    "linear_bias_not_summed_over_batch": (
        "every row wrong, yet the rows sum to the right one: not summed over the batch?"
    ),
    "linear_bias_mean_over_batch": "off by the same factor (0.125×) everywhere: a constant factor?",
}


def _assert_snapshot(name: str, text: str) -> None:
    path = SNAPSHOTS / name
    if UPDATE:
        path.parent.mkdir(exist_ok=True)
        path.write_text(text + "\n", encoding="utf-8")
    assert path.is_file(), f"no snapshot {path.name}: run with TRAINER_UPDATE_SNAPSHOTS=1"
    assert text + "\n" == path.read_text(encoding="utf-8"), (
        f"{path.name} differs from the drawing; if the change is meant, "
        "run with TRAINER_UPDATE_SNAPSHOTS=1"
    )


@pytest.mark.parametrize("name", list(PICTURES))
def test_a_bundled_wrong_variant_draws_its_mistake_as_in_the_snapshot(name):
    picture = PICTURES[name]()
    assert picture["pattern"] == PATTERNS[name]
    text = render_text(read_picture(picture) or pytest.fail("not a picture"), width=80)
    _assert_snapshot(f"{name}.txt", text)


def test_every_picture_fits_in_80_columns():
    for make in PICTURES.values():
        text = render_text(read_picture(make()) or pytest.fail("not a picture"), width=80)
        assert max(len(line) for line in text.splitlines()) <= 80


def test_an_error_map_in_colour_paints_each_cell_by_how_wrong_it_is():
    picture = read_picture(PICTURES["linear_grad_weight_transposed"]())
    assert picture is not None
    text = render_text(picture, width=80, color=True)
    assert "\x1b[1;31m" in text and "\x1b[2m" in text  # wrong cells red, right ones dim
    _assert_snapshot("linear_grad_weight_transposed.ansi", text)


def test_a_narrow_terminal_gets_an_error_map_pooled_to_fit():
    values = torch.randn(300, 200, generator=torch.Generator().manual_seed(1))
    wrong = values.clone()
    wrong[:, 50:60] += 1
    picture = error_map("big", values, wrong, rtol=1e-5, atol=1e-6)
    assert picture is not None
    assert picture["grid"] == [20, 50] and picture["block"] == [15, 4]
    assert picture["pattern"] == "whole columns wrong (10 of 200)"
    text = render_text(picture, width=50)
    assert max(len(line) for line in text.splitlines()) <= 50
    assert "a cell is the worst of 15 × 8 elements" in text.replace("\n  ", " ")


def test_a_picture_is_a_few_kilobytes_even_for_large_tensors():
    generator = torch.Generator().manual_seed(2)
    x = torch.rand(100_000, generator=generator) * 12 - 6
    upstream = torch.randn(100_000, generator=generator)
    slope = torch.sigmoid(x) * (1 - torch.sigmoid(x))
    big_curve = curve(
        "x", x, upstream * slope, 3 * upstream * slope, upstream, rtol=1e-5, atol=1e-6
    )
    matrix = torch.randn(512, 512, generator=generator)
    # The diagnosis is the backward stage's, made already: passed in, not made again.
    big_map = error_map("w", matrix, matrix.T, rtol=1e-5, atol=1e-6, mistake="transposed")
    nan = matrix * float("nan")
    every_cell_wrong = error_map("w", matrix, nan, rtol=1e-5, atol=1e-6, mistake="unknown")
    assert big_curve is not None and big_map is not None and every_cell_wrong is not None
    assert len(big_curve["x"]) == 80
    assert big_map["grid"] == [MAP_ROWS, 512 // 9 + 1] and big_map["grid"][1] <= MAP_COLUMNS
    assert every_cell_wrong["worst"] is None
    for picture in (big_curve, big_map, every_cell_wrong):
        assert len(json.dumps(picture, allow_nan=False)) <= 4096


def test_a_picture_reads_back_the_same_after_a_trip_through_json():
    for make in PICTURES.values():
        picture = make()
        assert read_picture(json.loads(json.dumps(picture, allow_nan=False))) == picture


def test_a_malformed_or_newer_picture_is_not_drawn():
    good = PICTURES["linear_grad_weight_transposed"]()
    broken = [
        {**good, "version": 2},
        {**good, "cells": good["cells"][:-1]},
        {**good, "kind": "hologram"},
        {**good, "wrong": "many"},
        "a string",
        None,
    ]
    assert all(read_picture(item) is None for item in broken)
    assert render_pictures([*broken, good]) == render_text(good)  # type: ignore[arg-type]


def test_right_gradients_get_no_picture_unless_asked_for():
    run = _float32_runs("linear")[0]
    inputs = {p.name: a for p, a in zip(run.params, run.args, strict=True)}
    right = dict(run.expected_grads)
    options: dict[str, Any] = {"elementwise": False, "rtol": 1e-5, "atol": 1e-6}
    assert gradient_pictures(inputs, run.expected_grads, right, run.upstream[0], **options) == []
    every = gradient_pictures(
        inputs, run.expected_grads, right, run.upstream[0], only_wrong=False, **options
    )
    assert [(p["input"], p["wrong"], p["pattern"]) for p in every] == [
        ("x", 0, "matches the right one everywhere"),
        ("weight", 0, "matches the right one everywhere"),
        ("bias", 0, "matches the right one everywhere"),
    ]


def test_a_curve_leaves_out_elements_whose_upstream_gradient_is_nearly_zero():
    x = torch.tensor([-1.0, 0.0, 1.0, 2.0])
    upstream = torch.tensor([1.0, 1e-9, -2.0, 0.5])
    picture = curve("x", x, upstream, upstream, upstream, rtol=1e-5, atol=1e-6)
    assert picture is not None
    assert picture["x"] == [-1.0, 1.0, 2.0] and picture["got"] == [1.0, 1.0, 1.0]
    assert picture["pattern"] == "matches the right one everywhere"


def test_a_slope_far_off_the_right_curve_is_drawn_as_an_arrow_at_the_edge():
    x = torch.linspace(-3, 3, 40)
    upstream = torch.ones(40)
    slope = torch.sigmoid(x) * (1 - torch.sigmoid(x))
    wrong = slope.clone()
    wrong[10], wrong[30] = 1e6, -1e6
    picture = curve("x", x, slope, wrong, upstream, rtol=1e-5, atol=1e-6)
    assert picture is not None
    text = render_text(picture)
    assert "↑↓ yours, off the scale" in text
    plot = text.splitlines()[2:-3]
    assert "↑" in plot[0] and "↓" in plot[-1]
    assert picture["pattern"] == "wrong at 2 of 40 elements"


def test_a_learner_gradient_of_a_shape_that_does_not_broadcast_gets_no_picture():
    assert error_map("w", torch.ones(3, 4), torch.ones(4, 3), rtol=1e-5, atol=1e-6) is None
    assert curve("x", torch.ones(3), torch.ones(3), torch.ones(2), None, rtol=0, atol=0) is None


PROBE = """
import json, sys
from trainer.pictures import render_pictures, notebook_view
from trainer.checking.picture_data import read_picture
loaded_at_import = sorted(m for m in ("plotille", "torch", "matplotlib", "numpy") if m in sys.modules)
pictures = json.load(open(sys.argv[1], encoding="utf-8"))
text = render_pictures(pictures, width=80, color=True)
shown = [repr(notebook_view(read_picture(p))) for p in pictures]
print(json.dumps({
    "at_import": loaded_at_import,
    "torch": "torch" in sys.modules,
    "matplotlib": "matplotlib" in sys.modules,
    "numpy": "numpy" in sys.modules,
    "drawn": len(text.splitlines()) > 20 and all(shown),
}))
"""


def test_drawing_a_picture_never_imports_torch_or_matplotlib(tmp_path: Path):
    pictures = tmp_path / "pictures.json"
    pictures.write_text(json.dumps([make() for make in PICTURES.values()]), encoding="utf-8")
    # Block matplotlib even where it is installed: the notebook view falls back to text.
    blocker = tmp_path / "blocker"
    (blocker / "matplotlib").mkdir(parents=True)
    (blocker / "matplotlib" / "__init__.py").write_text("raise ImportError('blocked')\n")
    result = subprocess.run(
        [sys.executable, "-c", PROBE, str(pictures)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(blocker), str(REPO)])},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "at_import": [],
        "torch": False,
        "matplotlib": False,
        "numpy": False,
        "drawn": True,
    }


def test_in_a_notebook_without_matplotlib_a_picture_is_its_text(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now fails
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    picture = read_picture(PICTURES["linear_bias_not_summed_over_batch"]())
    assert picture is not None
    shown = notebook_view(picture)
    assert isinstance(shown, TextPicture)
    assert repr(shown) == render_text(picture)


def test_in_a_notebook_with_matplotlib_a_picture_is_a_figure():
    pytest.importorskip("matplotlib")
    for make in PICTURES.values():
        picture = read_picture(make())
        assert picture is not None
        shown = notebook_view(picture)
        assert type(shown).__name__ == "Figure"
        title = " ".join(shown.axes[0].get_title().split())  # type: ignore[union-attr]
        assert title.endswith(picture["pattern"])


TERMINAL = {"json_output": False, "is_terminal": True, "columns": 100, "environ": {}}


@pytest.mark.parametrize(
    ("plot", "changes", "drawn"),
    [
        (None, {}, True),
        (None, {"columns": 59}, False),
        (None, {"is_terminal": False}, False),
        (None, {"json_output": True}, False),
        (None, {"environ": {"NO_COLOR": "1"}}, False),
        (None, {"environ": {"NO_COLOR": ""}}, True),
        (None, {"environ": {"TERM": "dumb"}}, False),
        (False, {}, False),
        (True, {"is_terminal": False, "json_output": True, "columns": 40}, True),
        (True, {"environ": {"NO_COLOR": "1"}}, True),
    ],
    ids=[
        "a wide terminal",
        "a narrow terminal",
        "piped",
        "--json",
        "NO_COLOR",
        "an empty NO_COLOR",
        "TERM=dumb",
        "--no-plot",
        "--plot when piped with --json",
        "--plot under NO_COLOR",
    ],
)
def test_pictures_appear_by_default_only_on_a_wide_interactive_terminal(plot, changes, drawn):
    assert should_draw(plot, **{**TERMINAL, **changes}) is drawn


def test_pictures_are_coloured_only_on_a_terminal_without_no_color():
    assert use_color(is_terminal=True, environ={})
    assert not use_color(is_terminal=False, environ={})
    assert not use_color(is_terminal=True, environ={"NO_COLOR": "1"})


def test_check_with_plot_draws_the_slope_under_the_report_and_json_carries_no_pictures_without_it():
    from tests.conftest import REPO, run_cli

    wrong = REPO / "solutions" / "wrong" / "clipped_relu" / "no_mask.py"
    drawn = run_cli("check", "clipped_relu", "--file", str(wrong), "--plot")
    assert drawn.exit_code == 1
    assert "Slope of your gradient for `input_tensor`" in drawn.stdout
    assert "a missing mask?" in drawn.stdout
    plain = run_cli("check", "clipped_relu", "--file", str(wrong), "--json")
    assert all("pictures" not in stage for stage in plain.json()["stages"])


def test_plot_draws_a_right_gradient_too():
    from tests.conftest import REPO, run_cli

    result = run_cli("plot", "sigmoid", "--file", str(REPO / "solutions" / "sigmoid.py"))
    assert result.exit_code == 0
    assert "wrong at 0 of" in result.stdout
