"""Find exercise specs and their reference solutions: bundled, and in folders an instructor adds.

A catalogue root holds ``exercises/<id>.yaml`` and ``solutions/<id>.py`` (with
``solutions/wrong/<id>/``). The bundled root is inside the wheel or at the top
of a checkout; more roots come from ``--exercises-dir`` and ``$TRAINER_EXERCISES``.
"""

from __future__ import annotations

import difflib
import heapq
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import yaml

from trainer.checking.feedback import DEFAULT_FEEDBACK, FEEDBACK_LEVELS
from trainer.errors import SpecError, UnknownExerciseError
from trainer.spec import DIFFICULTIES, TRACKS, Exercise, SharedQuiz, load_exercise, load_shared_quiz

_PACKAGE = Path(__file__).resolve().parent
EXERCISES_ENV = "TRAINER_EXERCISES"
# An exercise folder's settings, beside its exercises/: what an instructor decides for
# every exercise in it (today: the feedback level `check` shows).
FOLDER_SETTINGS = "trainer.yaml"


def catalog_root() -> Path:
    """The bundled folder holding ``exercises/`` and ``solutions/``.

    A wheel carries them inside the package (``trainer/_catalog``); a source
    checkout or an editable install has them at the top of the repo.
    """
    bundled = _PACKAGE / "_catalog"
    if (bundled / "exercises").is_dir():
        return bundled
    return _PACKAGE.parent


def root_of(folder: Path) -> Path:
    """The catalogue root for a folder given by a user: the root itself, or its exercises/."""
    folder = folder.expanduser()
    if (folder / "exercises").is_dir():
        return folder
    if folder.is_dir() and any(folder.glob("*.yaml")):
        return folder.parent
    raise SpecError(
        f"{folder} holds no exercises: give a folder with an exercises/ subfolder "
        "(and solutions/ beside it), or the exercises folder itself."
    )


def extra_roots(options: Sequence[Path] = ()) -> list[Path]:
    """Roots from ``--exercises-dir`` options, then from ``$TRAINER_EXERCISES`` (path-separated)."""
    folders = list(options)
    folders += [Path(p) for p in os.environ.get(EXERCISES_ENV, "").split(os.pathsep) if p]
    return [root_of(f) for f in folders]


@dataclass
class Catalog:
    roots: list[Path]
    _display: dict[Path, str] = field(default_factory=dict, repr=False)

    @classmethod
    def default(cls, extra: Sequence[Path] = ()) -> Catalog:
        roots = [catalog_root()]
        for root in extra_roots(extra):
            if root.resolve() not in [r.resolve() for r in roots]:
                roots.append(root)
        return cls(roots)

    def shared_quiz(self, quiz_id: str) -> SharedQuiz | None:
        """A quiz on shared concepts (``quizzes/<id>.yaml`` in a root), if there is one."""
        for root in self.roots:
            path = root / "quizzes" / f"{quiz_id}.yaml"
            if path.is_file():
                return load_shared_quiz(path, self._display.get(path, str(path)))
        return None

    @cached_property
    def _paths(self) -> dict[str, Path]:
        """Spec path per id; the same id in two roots is an error naming both files."""
        found: dict[str, Path] = {}
        for root in self.roots:
            folder = root / "exercises"
            if not folder.is_dir():
                raise SpecError(f"no exercises folder at {folder}; is the trainer installed?")
            for path in sorted(folder.glob("*.yaml")):
                if path.stem in found:
                    raise SpecError(
                        f"the exercise id `{path.stem}` is defined twice: {found[path.stem]} and "
                        f"{path}. Rename one of them (file name and `id`)."
                    )
                found[path.stem] = path
        return found

    def spec_paths(self) -> list[Path]:
        return list(self._paths.values())

    def ids(self) -> list[str]:
        return sorted(self._paths)

    def display_name(self, path: Path) -> str:
        for root in self.roots:
            try:
                return str(path.relative_to(root))
            except ValueError:
                continue
        return str(path)

    def get(self, exercise_id: str) -> Exercise:
        path = self._paths.get(exercise_id)
        if path is None:
            raise self.unknown(exercise_id)
        return load_exercise(path, self.display_name(path))

    @cached_property
    def all(self) -> list[Exercise]:
        """Every exercise, track by track (in the order of ``TRACKS``, then those without
        one); within a track each after what it ``requires``, and otherwise easiest
        first, then by ``order`` and id. A broken spec, or ``requires`` naming an
        unknown exercise, a later track or a cycle, raises SpecError."""
        exercises = [load_exercise(p, self.display_name(p)) for p in self.spec_paths()]
        problems = requires_problems(exercises)
        if problems:
            exercise = next(e for e in exercises if e.id in problems)
            raise SpecError(f"{self.display_name(exercise.source)}: {problems[exercise.id]}")
        return catalogue_order(exercises)

    def loadable(self) -> tuple[list[Exercise], list[str]]:
        """The exercises that load, in the order of :attr:`all`, and what is wrong with
        each of the others, its path named from the working folder (``trainer list``
        shows what it can)."""
        exercises: list[Exercise] = []
        broken: list[str] = []
        for path in self.spec_paths():
            try:
                exercises.append(load_exercise(path, from_here(path)))
            except SpecError as error:
                broken.append(error.message)
        problems = requires_problems(exercises)
        broken += [
            f"{from_here(e.source)}: {problems[e.id]}" for e in exercises if e.id in problems
        ]
        return catalogue_order([e for e in exercises if e.id not in problems]), broken

    def solution_path(self, exercise: Exercise) -> Path:
        return solution_path(exercise)

    def wrong_variant_path(self, exercise: Exercise, file: str) -> Path:
        return wrong_variant_path(exercise, file)

    def unknown(self, exercise_id: str) -> UnknownExerciseError:
        ids = self.ids()
        # 0.6, difflib's own threshold: "batch_nrm" suggests batch_norm, "nope" nothing.
        close = difflib.get_close_matches(exercise_id, ids, n=1, cutoff=0.6)
        suggestion = f" Did you mean `{close[0]}`?" if close else ""
        return UnknownExerciseError(
            f"no exercise called `{exercise_id}` in {self.where()}.{suggestion} "
            "Run `trainer list` to see them all; exercises in another folder need "
            "--exercises-dir DIR (once: the workspace remembers it)."
        )

    def where(self) -> str:
        """The folders searched, in words: the bundled exercises, then each extra folder."""
        bundled = catalog_root().resolve()
        places = [
            "the bundled exercises" if root.resolve() == bundled else str(root / "exercises")
            for root in self.roots
        ]
        return places[0] if len(places) == 1 else ", ".join(places[:-1]) + " and " + places[-1]


def from_here(path: Path) -> str:
    """``path`` as the user would type it from the working folder: relative when it is
    below it, else absolute."""
    try:
        return str(path.absolute().relative_to(Path.cwd()))
    except ValueError:
        return str(path.absolute())


def track_rank(exercise: Exercise) -> int:
    """The place of the exercise's track in ``trainer list`` (no track: after them all)."""
    tracks = list(TRACKS)
    return tracks.index(exercise.track) if exercise.track in tracks else len(tracks)


def sort_key(exercise: Exercise) -> tuple[int, int, int, str]:
    """Where an exercise stands in the catalogue, prerequisites aside: track,
    difficulty, ``order``, id."""
    return (
        track_rank(exercise),
        DIFFICULTIES.index(exercise.difficulty),
        exercise.order,
        exercise.id,
    )


def catalogue_order(exercises: Sequence[Exercise]) -> list[Exercise]:
    """The order of ``trainer list``: by :func:`sort_key`, except that an exercise never
    comes before one it ``requires``. Of the exercises whose prerequisites are all
    placed, the one with the smallest key goes next (a prerequisite that is not in
    ``exercises`` is ignored; a cycle leaves its members last, by key)."""
    known = {e.id for e in exercises}
    waiting = {e.id: {r for r in e.requires if r in known} for e in exercises}
    by_id = {e.id: e for e in exercises}
    ready = [(sort_key(e), e.id) for e in exercises if not waiting[e.id]]
    heapq.heapify(ready)
    placed: list[Exercise] = []
    while ready:
        _, exercise_id = heapq.heappop(ready)
        placed.append(by_id[exercise_id])
        for other, needs in waiting.items():
            if exercise_id in needs:
                needs.discard(exercise_id)
                if not needs:
                    heapq.heappush(ready, (sort_key(by_id[other]), other))
    done = {e.id for e in placed}
    return placed + sorted((e for e in exercises if e.id not in done), key=sort_key)


def requires_problems(exercises: Sequence[Exercise]) -> dict[str, str]:
    """What is wrong with the ``requires`` of each exercise of one catalogue, by id, as
    ``<field path>: <what is wrong>``: an id that is no exercise of it, an exercise of a
    later track (``trainer list`` shows tracks in order, so it could not come first),
    or a cycle."""
    by_id = {e.id: e for e in exercises}
    problems: dict[str, str] = {}
    for exercise in exercises:
        for index, required in enumerate(exercise.requires):
            other = by_id.get(required)
            if other is None:
                close = difflib.get_close_matches(required, list(by_id), n=1, cutoff=0.6)
                hint = f" (did you mean `{close[0]}`?)" if close else ""
                problems[exercise.id] = (
                    f"requires[{index}]: `{required}` is not an exercise of this catalogue{hint}"
                )
                break
            if track_rank(other) > track_rank(exercise):
                problems[exercise.id] = (
                    f"requires[{index}]: `{required}` belongs to a track that `trainer list` "
                    "shows after this exercise's: require exercises of the same track or "
                    "an earlier one"
                )
                break
    for cycle in _cycles(exercises):
        for member in cycle[:-1]:
            problems.setdefault(member, f"requires: a cycle of prerequisites: {' -> '.join(cycle)}")
    return problems


def _cycles(exercises: Sequence[Exercise]) -> list[list[str]]:
    """Cycles of ``requires`` (each as a path that ends where it starts), found by a
    depth-first search; one per strongly tied group is enough to report."""
    edges = {e.id: list(e.requires) for e in exercises}
    state: dict[str, int] = {}  # 1: on the current path, 2: finished
    found: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        path.append(node)
        for nxt in edges.get(node, []):
            if nxt not in edges:
                continue
            if state.get(nxt) == 1:
                found.append([*path[path.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt, path)
        path.pop()
        state[node] = 2

    for exercise_id in sorted(edges):
        if exercise_id not in state:
            visit(exercise_id, [])
    return found


def solutions_dir(exercise: Exercise) -> Path:
    """``solutions/`` beside the spec's ``exercises/`` folder."""
    return exercise.source.resolve().parent.parent / "solutions"


def solution_path(exercise: Exercise) -> Path:
    return solutions_dir(exercise) / f"{exercise.id}.py"


def wrong_variant_path(exercise: Exercise, file: str) -> Path:
    return solutions_dir(exercise) / "wrong" / exercise.id / file


def folder_feedback(exercise: Exercise) -> str:
    """The feedback level the exercise's folder sets (``feedback:`` in its
    ``trainer.yaml``), or full. A settings file that cannot be used is an error
    naming the file and the field: an instructor's choice is never ignored quietly."""
    spec_folder = exercise.source.resolve().parent
    settings = spec_folder.parent / FOLDER_SETTINGS
    if spec_folder.name != "exercises" or not settings.is_file():
        return DEFAULT_FEEDBACK
    try:
        data = yaml.safe_load(settings.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
        raise SpecError(f"{settings}: cannot be read as YAML ({error}).") from None
    if data is None:
        return DEFAULT_FEEDBACK
    if not isinstance(data, dict):
        raise SpecError(f"{settings}: expected a mapping of settings (feedback: summary).")
    unknown = sorted(str(key) for key in data if key != "feedback")
    if unknown:
        raise SpecError(f"{settings}: {unknown[0]}: not a setting; the settings are: feedback.")
    level = data.get("feedback", DEFAULT_FEEDBACK)
    if level not in FEEDBACK_LEVELS:
        raise SpecError(
            f"{settings}: feedback: {level!r} is not one of: {', '.join(FEEDBACK_LEVELS)}."
        )
    return str(level)
