"""Issue 29's order that teaches: every exercise declares `requires:`, validated (ids
exist, no cycle, no later track), and `list` / `next` put prerequisites first."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from tests.conftest import CATALOG, REPO, run_cli
from trainer.authoring import prerequisite_problems
from trainer.catalog import Catalog, catalogue_order, requires_problems
from trainer.errors import SpecError
from trainer.spec import Exercise, load_exercise

pytestmark = pytest.mark.usefixtures("warm_commands")


def _state(workspace: Path) -> dict[str, object]:
    state: dict[str, object] = json.loads((workspace / ".trainer-state.json").read_text())
    return state


def _catalogue(tmp_path: Path, requires: dict[str, list[str]]) -> Path:
    """A catalogue root of copies of bundled specs, with the given ``requires``."""
    folder = tmp_path / "exercises"
    folder.mkdir()
    for exercise_id, needs in requires.items():
        source = (REPO / "exercises" / f"{exercise_id}.yaml").read_text(encoding="utf-8")
        source = re.sub(r"^requires: .*$", f"requires: [{', '.join(needs)}]", source, flags=re.M)
        (folder / f"{exercise_id}.yaml").write_text(source, encoding="utf-8")
    return tmp_path


def test_every_bundled_spec_declares_its_prerequisites():
    for path in sorted((REPO / "exercises").glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        assert "requires" in data, f"{path.name} declares no requires"


def test_the_bundled_prerequisites_hold():
    assert requires_problems(CATALOG.all) == {}


def test_the_order_of_list_puts_every_prerequisite_first():
    place = {e.id: n for n, e in enumerate(CATALOG.all)}
    for exercise in CATALOG.all:
        for required in exercise.requires:
            assert place[required] < place[exercise.id], (exercise.id, required)


def test_list_on_the_terminal_follows_the_prerequisites():
    shown = re.findall(
        r"^(?:[a-z_]+)?\s+(?:→\s+)?([a-z0-9_]+)\s+(?:easy|medium|hard|expert)\s",
        run_cli("list").stdout,
        re.M,
    )
    assert shown == [e.id for e in CATALOG.all]


def test_next_on_a_fresh_workspace_starts_sigmoid(isolated_workspace: Path):
    result = run_cli("next")
    assert result.exit_code == 0, result.stderr
    assert _state(isolated_workspace)["current"] == "sigmoid"


def test_next_with_a_track_starts_a_prerequisite_not_passed_first(isolated_workspace: Path):
    mse = CATALOG.get("mse_loss")
    assert mse.requires == ("reduce_mean",)
    assert next(e.id for e in CATALOG.all if e.track == "losses") == "mse_loss"
    result = run_cli("next", "--track", "losses")
    assert result.exit_code == 0, result.stderr
    assert _state(isolated_workspace)["current"] == "reduce_mean"
    assert "`mse_loss` requires `reduce_mean`, not passed yet" in result.stdout + result.stderr


def test_a_requirement_breaks_the_key_order_when_it_must():
    by_id = {e.id: e for e in CATALOG.all}
    silu, sigmoid = by_id["silu"], by_id["sigmoid"]
    early_silu = Exercise(**{**silu.__dict__, "difficulty": "easy", "order": 0})
    order = [e.id for e in catalogue_order([early_silu, sigmoid])]
    assert order == ["sigmoid", "silu"]


def test_an_unknown_prerequisite_is_named_with_its_file_and_field(tmp_path: Path):
    root = _catalogue(tmp_path, {"sigmoid": [], "silu": ["sigmod"]})
    with pytest.raises(SpecError) as raised:
        _ = Catalog([root]).all
    assert raised.value.message == (
        "exercises/silu.yaml: requires[0]: `sigmod` is not an exercise of this catalogue "
        "(did you mean `sigmoid`?)"
    )


def test_a_cycle_of_prerequisites_is_refused(tmp_path: Path):
    root = _catalogue(tmp_path, {"sigmoid": ["tanh"], "tanh": ["silu"], "silu": ["sigmoid"]})
    with pytest.raises(SpecError) as raised:
        _ = Catalog([root]).all
    assert "requires: a cycle of prerequisites: " in raised.value.message
    assert "sigmoid -> tanh -> silu -> sigmoid" in raised.value.message


def test_a_prerequisite_of_a_later_track_is_refused(tmp_path: Path):
    root = _catalogue(tmp_path, {"sigmoid": ["linear"], "linear": []})
    with pytest.raises(SpecError) as raised:
        _ = Catalog([root]).all
    assert raised.value.message.startswith(
        "exercises/sigmoid.yaml: requires[0]: `linear` belongs to a track that `trainer list` "
        "shows after this exercise's"
    )


@pytest.mark.parametrize(
    ("requires", "message"),
    [
        ("[sigmoid]", "requires[0]: an exercise cannot require itself"),
        ("[relu, relu]", "requires[1]: 'relu' is listed twice"),
        ("[Relu]", "requires[0]: 'Relu' is not an exercise id"),
    ],
)
def test_a_spec_s_own_requires_is_checked_when_it_loads(
    tmp_path: Path, requires: str, message: str
):
    root = _catalogue(tmp_path, {"sigmoid": []})
    spec = root / "exercises" / "sigmoid.yaml"
    spec.write_text(
        re.sub(r"^requires: .*$", f"requires: {requires}", spec.read_text(), flags=re.M)
    )
    with pytest.raises(SpecError) as raised:
        load_exercise(spec, "exercises/sigmoid.yaml")
    assert raised.value.message.startswith(f"exercises/sigmoid.yaml: {message}")


def test_validate_reports_a_bad_prerequisite_against_the_whole_catalogue(tmp_path: Path):
    root = _catalogue(tmp_path, {"sigmoid": [], "silu": ["gelu"]})
    silu = load_exercise(root / "exercises" / "silu.yaml")
    catalogue = Catalog([root]).spec_paths()
    assert prerequisite_problems([silu], catalogue) == {
        "silu": "requires[0]: `gelu` is not an exercise of this catalogue"
    }
    assert prerequisite_problems([silu], [*catalogue, REPO / "exercises" / "gelu.yaml"]) == {}
