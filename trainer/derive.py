"""The gradient on the whiteboard, apart from asking: which exercises have one, and the
record of each (progress, like the quiz's). Asking is the CLI's job; judging a formula
is :mod:`trainer.whiteboard`'s (torch), understanding one :mod:`trainer.formula`'s."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from trainer.formula import output_names
from trainer.spec import Exercise, ScalarParam, TensorParam
from trainer.state import StateStore


@dataclass(frozen=True)
class Record:
    """An exercise's derivations so far."""

    attempts: int
    passed: bool


def derivable(exercises: Sequence[Exercise]) -> list[Exercise]:
    """The exercises with a formula to derive (a ``derive`` section), in the given order."""
    return [e for e in exercises if e.derive is not None]


def asked(exercise: Exercise) -> list[str]:
    """The inputs whose gradient is asked for, in the order of the parameters."""
    answers = exercise.derive.answers if exercise.derive is not None else {}
    return [p.name for p in exercise.parameters if p.name in answers]


def names(exercise: Exercise) -> list[tuple[str, str]]:
    """Each name a formula may use, with what it is, in the order they are shown."""
    derivation = exercise.derive
    if derivation is None:
        return []
    described: list[tuple[str, str]] = []
    inputs = [p.name for p in exercise.parameters if isinstance(p, TensorParam) and p.is_float]
    first = exercise.cases[0].values
    for param in exercise.parameters:
        if param.name not in derivation.scope:
            continue
        if isinstance(param, ScalarParam):
            described.append((param.name, f"a number ({param.kind}), as given to forward"))
            continue
        value = first[param.name]
        shape = value if isinstance(value, tuple) else ()
        dims = ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "")
        if param.is_float:
            what = "the input" if len(inputs) == 1 else "an input"
        else:
            what = "whole numbers (no gradient)"
        described.append((param.name, f"{what}, of shape ({dims}) in the first case"))
    pairs = output_names(exercise.outputs, [p.name for p in exercise.parameters])
    if exercise.outputs == 1:
        ((y, g),) = pairs
        described.append((y, "the output"))
        described.append((g, f"dL/d{y}, the upstream gradient (grad_output)"))
    else:
        for number, (y, g) in enumerate(pairs, 1):
            described.append((y, f"output {number}"))
            described.append((g, f"dL/d{y}, its upstream gradient"))
    for name, formula in derivation.names.items():
        described.append((name, f"= {formula}"))
    return described


def record(store: StateStore, exercise_id: str, right: int, total: int) -> Record:
    """Count a finished derivation; it is passed when every formula was right."""
    with store.update() as state:
        progress = state.progress(exercise_id)
        progress.derive_attempts += 1
        progress.derive_passed = progress.derive_passed or right == total
        return Record(progress.derive_attempts, progress.derive_passed)
