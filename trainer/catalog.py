"""Find exercise specs and their reference solutions, in a repo checkout or an installed wheel."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from trainer.errors import SpecError, UnknownExerciseError
from trainer.spec import DIFFICULTIES, Exercise, load_exercise

_PACKAGE = Path(__file__).resolve().parent


def catalog_root() -> Path:
    """The folder holding ``exercises/`` and ``solutions/``.

    A wheel carries them inside the package (``trainer/_catalog``); a source
    checkout or an editable install has them at the top of the repo.
    """
    bundled = _PACKAGE / "_catalog"
    if (bundled / "exercises").is_dir():
        return bundled
    return _PACKAGE.parent


@dataclass
class Catalog:
    root: Path

    @classmethod
    def default(cls) -> Catalog:
        return cls(catalog_root())

    @property
    def exercises_dir(self) -> Path:
        return self.root / "exercises"

    @property
    def solutions_dir(self) -> Path:
        return self.root / "solutions"

    def spec_paths(self) -> list[Path]:
        if not self.exercises_dir.is_dir():
            raise SpecError(
                f"no exercises folder at {self.exercises_dir}; is the trainer installed?"
            )
        return sorted(self.exercises_dir.glob("*.yaml"))

    def ids(self) -> list[str]:
        return [p.stem for p in self.spec_paths()]

    def display_name(self, path: Path) -> str:
        try:
            return str(path.relative_to(self.root))
        except ValueError:
            return str(path)

    def get(self, exercise_id: str) -> Exercise:
        path = self.exercises_dir / f"{exercise_id}.yaml"
        if not path.is_file():
            raise self.unknown(exercise_id)
        return load_exercise(path, self.display_name(path))

    @cached_property
    def all(self) -> list[Exercise]:
        """Every exercise, easiest first, then by ``order`` and id; a broken spec raises SpecError."""
        exercises = [load_exercise(p, self.display_name(p)) for p in self.spec_paths()]
        return sorted(exercises, key=lambda e: (DIFFICULTIES.index(e.difficulty), e.order, e.id))

    def unknown(self, exercise_id: str) -> UnknownExerciseError:
        ids = self.ids()
        close = difflib.get_close_matches(exercise_id, ids, n=1, cutoff=0.5)
        suggestion = f" Did you mean `{close[0]}`?" if close else ""
        return UnknownExerciseError(
            f"no exercise called `{exercise_id}`.{suggestion} "
            f"Exercises: {', '.join(ids)}. Run `trainer list` to see them all."
        )

    def solution_path(self, exercise: Exercise) -> Path:
        return self.solutions_dir / f"{exercise.id}.py"

    def wrong_variant_path(self, exercise: Exercise, file: str) -> Path:
        return self.solutions_dir / "wrong" / exercise.id / file
