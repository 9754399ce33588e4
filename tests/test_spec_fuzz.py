"""Property-based: whatever a spec file holds, loading it gives an Exercise or lines naming file and field, one per problem."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import REPO
from trainer.errors import SpecError
from trainer.spec import Exercise, load_exercise

SPECS = sorted((REPO / "exercises").glob("*.yaml"))
BASES = {
    p.name: yaml.load(p.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    for p in SPECS
}
SETTINGS = settings(
    max_examples=300,
    derandomize=True,  # the same cases on every run: CI never flakes
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*prefix, index))
    return found


ODD_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.lists(st.integers(min_value=-(10**12), max_value=10**12), max_size=5),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
)


def _assert_loads_or_names_the_problem(path: Path) -> None:
    try:
        result = load_exercise(path, f"exercises/{path.name}")
    except SpecError as error:
        # Every problem at once (issue 33), one per line, each naming the file and field.
        lines = error.message.splitlines()
        assert lines and all(line.startswith(f"exercises/{path.name}") for line in lines)
        assert len(set(lines)) == len(lines), error.message
        assert "Traceback" not in error.message
    else:
        assert isinstance(result, Exercise)


def _write(tmp_path: Path, name: str, data: Any) -> Path:
    path = tmp_path / name
    # libyaml's safe dumper where it is built (the pure-Python one is ~10x slower).
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    path.write_text(yaml.dump(data, Dumper=dumper, allow_unicode=True), encoding="utf-8")
    return path


@SETTINGS
@given(data=st.data())
def test_dropping_or_retyping_any_field_gives_a_named_error_or_a_valid_spec(tmp_path, data):
    name = data.draw(st.sampled_from(sorted(BASES)))
    spec = copy.deepcopy(BASES[name])
    paths = _paths(spec)
    for _ in range(data.draw(st.integers(min_value=1, max_value=3))):
        where = data.draw(st.sampled_from(paths))
        parent: Any = spec
        for key in where[:-1]:
            parent = parent[key] if isinstance(parent, dict | list) and _has(parent, key) else None
        if parent is None or not _has(parent, where[-1]):
            continue
        if data.draw(st.booleans()) and isinstance(parent, dict):
            del parent[where[-1]]
        else:
            parent[where[-1]] = data.draw(ODD_VALUES)
    _assert_loads_or_names_the_problem(_write(tmp_path, name, spec))


def _has(container: Any, key: Any) -> bool:
    if isinstance(container, dict):
        return key in container
    return isinstance(container, list) and isinstance(key, int) and 0 <= key < len(container)


@SETTINGS
@given(data=st.data())
def test_corrupted_yaml_text_gives_a_named_error_or_a_valid_spec(tmp_path, data):
    name = data.draw(st.sampled_from(sorted(BASES)))
    text = (REPO / "exercises" / name).read_text()
    for _ in range(data.draw(st.integers(min_value=1, max_value=4))):
        position = data.draw(st.integers(min_value=0, max_value=len(text)))
        junk = data.draw(
            st.sampled_from(
                [
                    ":",
                    "- ",
                    "{",
                    "]",
                    "\t",
                    "&a",
                    "*a",
                    "!!python/object:os.system",
                    "\n  - ",
                    "'",
                    '"',
                    "%",
                    "@",
                    "\x00",
                    "\ufeff",
                    "…",
                ]
            )
        )
        text = text[:position] + junk + text[position:]
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    _assert_loads_or_names_the_problem(path)


@SETTINGS
@given(
    encoding=st.sampled_from(["utf-16", "utf-32", "latin-1", "cp1252"]),
    name=st.sampled_from(sorted(BASES)),
)
def test_other_encodings_give_a_named_error_or_a_valid_spec(tmp_path, encoding, name):
    text = (REPO / "exercises" / name).read_text() + "\n# déjà vu ✓\n"
    path = tmp_path / name
    path.write_bytes(text.encode(encoding, errors="replace"))
    _assert_loads_or_names_the_problem(path)


@pytest.mark.parametrize("depth", [50, 500, 999, 1000, 1001, 2000, 5000, 20000])
def test_deeply_nested_yaml_gives_a_named_error(tmp_path, depth):
    path = tmp_path / "deep.yaml"
    path.write_text("a: " + "[" * depth + "]" * depth + "\n")
    _assert_loads_or_names_the_problem(path)
