"""Issue 12's tracks: every exercise in one, `list` grouped by them, `next --track`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import CATALOG, REPO, run_cli
from trainer.catalog import sort_key
from trainer.spec import DIFFICULTIES, TRACKS, load_exercise

# What the commands say and record, on the worker's warm checking server.
pytestmark = pytest.mark.usefixtures("warm_commands")


def _state(workspace: Path) -> dict[str, object]:
    state: dict[str, object] = json.loads((workspace / ".trainer-state.json").read_text())
    return state


def test_every_bundled_exercise_names_a_known_track():
    for exercise in CATALOG.all:
        assert exercise.track in TRACKS, exercise.id


def test_every_track_but_the_future_ones_has_exercises():
    used = {e.track for e in CATALOG.all}
    assert used == set(TRACKS)


def test_within_a_track_exercises_go_by_difficulty_then_order():
    for track in TRACKS:
        mine = [e for e in CATALOG.all if e.track == track]
        keys = [(DIFFICULTIES.index(e.difficulty), e.order, e.id) for e in mine]
        assert keys == sorted(keys), track
    assert [sort_key(e) for e in CATALOG.all] == sorted(sort_key(e) for e in CATALOG.all)


def test_an_unknown_track_in_a_spec_is_named_with_the_known_ones(tmp_path: Path):
    source = (REPO / "exercises" / "sigmoid.yaml").read_text()
    spec = tmp_path / "exercises" / "sigmoid.yaml"
    spec.parent.mkdir()
    spec.write_text(re.sub(r"^track: .*$", "track: optimisers", source, flags=re.M))
    try:
        load_exercise(spec, "exercises/sigmoid.yaml")
    except Exception as error:
        message = str(error)
    assert message.startswith("exercises/sigmoid.yaml: track: 'optimisers' is not one of: ")
    assert "activations" in message and "function_api" in message


def test_list_shows_the_exercises_under_their_tracks_in_catalogue_order():
    lines = run_cli("list").stdout.splitlines()
    track = None
    seen = []
    for line in lines:
        # A track's id begins the line of its first exercise (issue 33).
        if line[:1].strip() and line.split()[0] in TRACKS:
            track = line.split()[0]
        match = re.match(
            r"(?:[a-z_]+)?\s+(?:→\s+)?([a-z0-9_]+)\s+(easy|medium|hard|expert)\s", line
        )
        if match:
            exercise = CATALOG.get(match.group(1))
            assert exercise.track == track, exercise.id
            seen.append(exercise.id)
    assert seen == [e.id for e in CATALOG.all]


def test_next_with_a_track_starts_the_first_exercise_of_that_track_not_passed(
    isolated_workspace: Path,
):
    api = [e for e in CATALOG.all if e.track == "function_api"]
    assert not api[0].requires, "this test wants a first exercise with no prerequisite"
    result = run_cli("next", "--track", "function_api")
    assert result.exit_code == 0, result.stderr
    assert _state(isolated_workspace)["current"] == api[0].id
    assert (isolated_workspace / f"{api[0].id}.py").is_file()


def test_next_with_a_track_moves_on_once_the_first_is_passed(isolated_workspace: Path):
    first, second = [e for e in CATALOG.all if e.track == "function_api"][:2]
    assert not first.requires and not second.requires
    run_cli("next", "--track", "function_api")
    (isolated_workspace / f"{first.id}.py").write_text(
        (REPO / "solutions" / f"{first.id}.py").read_text()
    )
    assert run_cli("check", first.id).exit_code == 0
    run_cli("next", "-t", "function_api")
    assert _state(isolated_workspace)["current"] == second.id


def test_next_with_an_unknown_track_is_a_usage_error_listing_the_tracks():
    result = run_cli("next", "--track", "optimisers")
    assert result.exit_code == 2
    assert "--track" in result.stderr
    for track in TRACKS:
        assert track in result.stderr


def test_the_readme_catalogue_lists_every_exercise_under_its_track():
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("## Exercises") : readme.index("## Adding an exercise")]
    current = None
    listed = {}
    for line in section.splitlines():
        heading = re.match(r"### (.+)", line)
        if heading:
            current = heading.group(1).strip()
        row = re.match(r"\| `([a-z0-9_]+)` \|", line)
        if row:
            listed[row.group(1)] = current
    assert listed == {e.id: TRACKS[e.track] for e in CATALOG.all if e.track}
