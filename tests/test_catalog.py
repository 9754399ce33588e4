"""Every bundled exercise: its files and its wrong variants' coverage.

That its stub fails for want of a backward, its reference passes and each wrong
variant fails where declared is `trainer validate`'s job; tests/test_authoring.py
runs it on every spec of the catalogue.
"""

from __future__ import annotations

import pytest

from tests.conftest import CATALOG
from trainer.spec import Exercise

EXERCISES = CATALOG.all


def _id(exercise: Exercise) -> str:
    return exercise.id


def test_the_catalogue_has_the_core_exercises():
    assert {"sigmoid", "linear", "clipped_relu"} <= {e.id for e in EXERCISES}


@pytest.mark.parametrize("exercise", EXERCISES, ids=_id)
def test_every_declared_wrong_variant_file_exists(exercise: Exercise):
    for variant in exercise.wrong_variants:
        assert CATALOG.wrong_variant_path(exercise, variant.file).is_file(), variant.file


CORE = [e for e in EXERCISES if e.id in ("sigmoid", "linear", "clipped_relu")]


@pytest.mark.parametrize("exercise", EXERCISES, ids=_id)
def test_each_exercise_has_at_least_three_wrong_variants(exercise: Exercise):
    assert len(exercise.wrong_variants) >= 3


@pytest.mark.parametrize("exercise", CORE, ids=_id)
def test_each_core_exercise_has_six_wrong_variants_that_name_their_mistake(exercise: Exercise):
    named = [v for v in exercise.wrong_variants if v.mistake is not None]
    assert len(exercise.wrong_variants) >= 6
    assert len({v.mistake for v in named}) >= 5, [v.file for v in named]


# reduce_mean's classic mistakes (the sum's gradient, dividing by numel or by the
# last dim, broadcasting along the wrong dim) are the checker's own constant_factor,
# transposed and wrong_shape: it has nothing of its own to declare.
GENERIC_ONLY = {"reduce_mean"}


@pytest.mark.parametrize("exercise", EXERCISES, ids=_id)
def test_each_exercise_declares_its_classic_mistakes(exercise: Exercise):
    if exercise.id in GENERIC_ONLY:
        assert not exercise.mistakes
    else:
        assert exercise.mistakes, "declare the op's classic mistakes (spec-format: mistakes)"


@pytest.mark.parametrize("exercise", EXERCISES, ids=_id)
def test_each_declared_mistake_is_held_by_a_wrong_variant(exercise: Exercise):
    named = {v.mistake for v in exercise.wrong_variants}
    assert set(exercise.mistakes) <= named, sorted(set(exercise.mistakes) - named)
