"""The worked derivation of an exercise, shown after a pass (issue 31 §4).

A spec's ``derivation:`` goes from the forward's definition to the formula that
backward computes, in math notation, and ends with the points where learners go
wrong. It holds no code: the code is ``trainer solution``'s.

* The first pass of an exercise shows it: ``trainer check`` under the report, the
  ``check()`` API as :attr:`trainer.api.Report.derivation`, a notebook's check
  under its table. A later pass only says where it is (:func:`after_check`).
* ``trainer explain EX`` shows it again, any time after a pass.
* Before a pass it is gated as the solution is (a pass, or ``--force``, or yes to
  ``[y/N]`` on a terminal). It holds the complete formula, which the last hint
  gives, and how it comes, but no code: looking early counts as every hint seen
  (``trainer hint --all``), not as looking at the solution (:func:`record_early_look`).

Everything here returns plain data; the command line and the notebook render it.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainer.errors import TrainerError
from trainer.hints import reveal_all_hints
from trainer.spec import Exercise
from trainer.state import Progress, StateStore

NO_DERIVATION = (
    "`{id}` has no worked derivation (its spec has no `derivation:` field). "
    "`{command} solution {id}` shows what to notice."
)
NOT_PASSED = (
    "you have not passed `{id}` yet: its derivation comes after a pass. Keep trying "
    "(`{command} hint {id}` reveals the next hint), or see it anyway with "
    "`{command} explain {id} --force`, which counts as every hint seen."
)
EARLY_QUESTION = (
    "You have not passed `{id}` yet. See its derivation anyway? It gives the whole formula "
    "and counts as every hint seen."
)
DECLINED = "Good call. `{command} hint {id}` reveals one more hint."


class NotPassedYet(TrainerError):
    """The derivation was asked for before a pass, without ``--force``."""


@dataclass(frozen=True)
class Derivation:
    """An exercise's worked derivation, ready to show."""

    exercise: str  # the exercise's id
    title: str  # the exercise's title
    text: str  # preformatted lines of math, none longer than the spec's author made it
    passed: bool = True  # False when it is shown before a pass (``--force``)


@dataclass(frozen=True)
class AfterCheck:
    """What a passing check says of the derivation: all of it on the exercise's first
    pass, where to find it again (``trainer explain EX``) on a later one."""

    exercise: str
    first_pass: bool
    derivation: Derivation | None  # the first pass's, when the exercise has one


def derivation_of(exercise: Exercise, *, passed: bool = True) -> Derivation | None:
    """The exercise's derivation, or None when its spec has none."""
    lines = [line.rstrip() for line in exercise.derivation.strip("\n").splitlines()]
    text = "\n".join(lines).strip("\n")
    if not text.strip():
        return None
    return Derivation(exercise.id, exercise.title, text, passed)


def is_first_pass(progress: Progress) -> bool:
    """True when the last check recorded in ``progress`` was the exercise's first pass:
    the study record keeps how many checks the first pass took (it included), and
    only that check leaves the count of checks equal to it. An exercise passed by an
    older version, which did not keep that number, has had its first pass."""
    return (
        progress.passed
        and progress.checks_to_pass is not None
        and progress.checks == progress.checks_to_pass
    )


def after_check(store: StateStore, exercise: Exercise, passed: bool) -> AfterCheck | None:
    """What a check that was just recorded in ``store`` says of the derivation: None
    after a failure, for an exercise without a derivation, or where no progress is kept
    (no workspace: no pass is recorded, so none is the first)."""
    if not passed or derivation_of(exercise) is None:
        return None
    progress = store.load().exercises.get(exercise.id)
    if progress is None or not progress.passed:
        return None
    first = is_first_pass(progress)
    return AfterCheck(exercise.id, first, derivation_of(exercise) if first else None)


def first_pass_derivation(store: StateStore, exercise: Exercise, passed: bool) -> str | None:
    """The derivation's text when the check just recorded in ``store`` was the
    exercise's first pass (what the ``check()`` API's report carries), else None."""
    after = after_check(store, exercise, passed)
    return after.derivation.text if after is not None and after.derivation is not None else None


def has_passed(store: StateStore, exercise_id: str) -> bool:
    """Whether the workspace of ``store`` records a pass of the exercise (False where
    there is no workspace)."""
    if not store.workspace.is_dir():
        return False
    progress = store.load().exercises.get(exercise_id)
    return progress is not None and progress.passed


def explanation(
    exercise: Exercise, store: StateStore, *, force: bool = False, command: str = "trainer"
) -> Derivation:
    """The derivation for ``trainer explain`` (and ``%trainer explain``): after a pass, or
    before one with ``force`` (the caller records the early look with
    :func:`record_early_look`). ``command``: how a command is typed where it is asked.

    Raises :class:`TrainerError` when the spec has none, and :class:`NotPassedYet`
    before a pass without ``force`` (the message says so and points to the hints)."""
    passed = has_passed(store, exercise.id)
    found = derivation_of(exercise, passed=passed)
    if found is None:
        raise TrainerError(NO_DERIVATION.format(id=exercise.id, command=command))
    if not passed and not force:
        raise NotPassedYet(NOT_PASSED.format(id=exercise.id, command=command))
    return found


def record_early_look(store: StateStore, exercise: Exercise) -> None:
    """A look at the derivation before a pass: every hint counts as seen (an
    interview under way counts them too)."""
    reveal_all_hints(exercise, store)
