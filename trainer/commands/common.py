"""What every command shares: the two common options, the session a command works in,
and completion of exercise ids.

The command modules of this package import it; it imports none of them, nor
:mod:`trainer.cli`, so the CLI has no import cycle.

No `from __future__ import annotations` in the CLI modules: typer would then
evaluate every annotation string of every command at each start.
"""

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from trainer import console
from trainer.catalog import EXERCISES_ENV, Catalog, root_of
from trainer.errors import TrainerError, WorkspaceError
from trainer.settings import Settings, load_settings, remember_exercise_dirs
from trainer.spec import Exercise
from trainer.state import STATE_FILE, StateStore
from trainer.workspace import DEFAULT_WORKSPACE, WORKSPACE_ENV, Workspace, resolve_workspace

if TYPE_CHECKING:
    from trainer.interview import InterviewSummary

# The panels of `trainer --help`.
LEARN_PANEL = "Learn"
AUTHOR_PANEL = "Author and teach"

# No square brackets in help texts: rich markup would swallow them.
WORKSPACE_HELP = (
    f"Folder for scratch files and progress (env: {WORKSPACE_ENV}; default: the nearest "
    f"{DEFAULT_WORKSPACE} in this folder or above, else ./{DEFAULT_WORKSPACE})."
)
EXERCISES_DIR_HELP = (
    f"Another folder of exercises, remembered by the workspace; repeatable (env: "
    f"{EXERCISES_ENV}, path-separated)."
)


@dataclass
class SharedOptions:
    """``--workspace`` and ``--exercises-dir`` given before the command name
    (``trainer -w DIR check``); the root callback keeps them in ``ctx.obj``."""

    workspace: Path | None = None
    exercises_dirs: list[Path] = field(default_factory=list)


def complete_exercise(incomplete: str) -> list[str]:
    """Shell completion for exercise ids (no torch, just file names)."""
    try:
        remembered = load_settings(resolve_workspace()).exercise_dirs
        return [i for i in Catalog.default(remembered).ids() if i.startswith(incomplete)]
    except TrainerError:
        return []


WorkspaceOption = Annotated[
    Path | None,
    typer.Option("--workspace", "-w", help=WORKSPACE_HELP, show_default=False),
]
ExercisesDirOption = Annotated[
    list[Path] | None,
    typer.Option("--exercises-dir", help=EXERCISES_DIR_HELP, show_default=False),
]
ExerciseArgument = Annotated[
    str | None,
    typer.Argument(
        metavar="EXERCISE",
        help="Exercise id (see `trainer list`); defaults to the current one.",
        show_default=False,
        autocompletion=complete_exercise,
    ),
]


class Session:
    """What a command works with: the catalogue, the workspace and its progress file.

    Opening one also ends an interview whose time ran out (any command notices
    it) and remembers the exercise folders given with ``--exercises-dir``.
    """

    def __init__(
        self,
        ctx: typer.Context,
        workspace: Path | None = None,
        exercises_dirs: list[Path] | None = None,
    ) -> None:
        shared = ctx.find_object(SharedOptions) or SharedOptions()
        self.workspace = Workspace(resolve_workspace(workspace or shared.workspace))
        self.store = StateStore(self.workspace.root)
        self._given = [*shared.exercises_dirs, *(exercises_dirs or [])]
        settings = load_settings(self.workspace.root) if self.exists else Settings()
        self.store.notices += settings.notices
        self.catalog = Catalog.default([*self._given, *settings.exercise_dirs])
        if self.exists:
            self._remember_exercise_dirs()
            self._end_interview_if_time_is_up()

    @property
    def exists(self) -> bool:
        return self.workspace.root.is_dir()

    def _remember_exercise_dirs(self) -> None:
        if self._given:
            remember_exercise_dirs(self.workspace.root, [root_of(f) for f in self._given])

    def _end_interview_if_time_is_up(self) -> None:
        if not (self.workspace.root / STATE_FILE).is_file():
            return
        from trainer.interview import expire_if_due

        summary = expire_if_due(self.store)
        self.show_notices()  # a damaged progress file is reported here, once
        if summary is not None:
            console.interview_summary(summary)

    def exercise(self, exercise_id: str | None) -> Exercise:
        """The exercise named, else the current one; an error naming the workspace when none."""
        if exercise_id is not None:
            return self.catalog.get(exercise_id)
        root = self.workspace.root
        if not self.exists:
            raise WorkspaceError(
                f"no current exercise: there is no workspace at {root} (none in this folder or "
                "the folders above it). Start one with `trainer start sigmoid` (see `trainer "
                "list`), or choose a workspace with --workspace."
            )
        current = self.store.load().current
        if current is None:
            raise WorkspaceError(
                f"no current exercise in the workspace {root}. Start one with `trainer start "
                "sigmoid` (see `trainer list`), or name it: `trainer check sigmoid`."
            )
        return self.catalog.get(current)

    def working_path(self, exercise: Exercise) -> Path:
        """The file the learner works in: during an interview on ``exercise`` the
        interview's own file, else the scratch file."""
        if self.exists and (self.workspace.root / STATE_FILE).is_file():
            interview = self.store.load().interview
            if interview is not None and interview.exercise == exercise.id:
                return self.workspace.interview_path(exercise.id)
        return self.workspace.scratch_path(exercise.id)

    def scratch_file(self, exercise: Exercise) -> Path:
        """The file the learner works in, which must exist: while a review of the exercise
        is open, the review's own file (:mod:`trainer.review`); else :meth:`working_path`
        (an interview's own file, or the scratch file)."""
        review = self.review_file(exercise)
        path = review if review is not None else self.working_path(exercise)
        if not path.is_file():
            raise WorkspaceError(
                f"no file at {path}. Run `trainer start {exercise.id}` to create it."
            )
        return path

    def review_file(self, exercise: Exercise) -> Path | None:
        """The file of the exercise's open review, when one is open and its file exists."""
        if not self.exists:
            return None
        from trainer.review import is_open, review_path

        path = review_path(self.workspace, exercise.id)
        progress = self.store.load().exercises.get(exercise.id)
        return path if progress is not None and is_open(progress) and path.is_file() else None

    def writable_store(self) -> StateStore:
        self.workspace.ensure()
        self._remember_exercise_dirs()
        return self.store

    def start(self, exercise: Exercise, force: bool = False, watching: bool = False) -> None:
        """Write the scratch file (never over edits without a backup) and make it current."""
        result = self.workspace.start(exercise, force=force)
        self._remember_exercise_dirs()
        from trainer.history import mark_started

        with self.store.update() as state:
            state.current = exercise.id
            mark_started(state, exercise.id)
        self.show_notices()
        console.started(exercise, result, watching=watching)

    def first_not_passed(self, track: str | None = None) -> Exercise | None:
        """The first exercise of ``trainer list`` (of one track) not passed yet."""
        state = self.store.load() if self.exists else None
        for exercise in self.catalog.all:
            if track is not None and exercise.track != track:
                continue
            if state is None or not state.progress(exercise.id).passed:
                return exercise
        return None

    def prerequisites_not_passed(self, exercise: Exercise) -> list[Exercise]:
        """What ``exercise`` requires, directly or not, and is not passed yet, in the
        order of ``trainer list``."""
        state = self.store.load() if self.exists else None
        by_id = {e.id: e for e in self.catalog.all}
        needed: set[str] = set()
        todo = list(exercise.requires)
        while todo:
            required = todo.pop()
            if required in needed or required not in by_id:
                continue
            needed.add(required)
            todo += by_id[required].requires
        return [
            e
            for e in self.catalog.all
            if e.id in needed and (state is None or not state.progress(e.id).passed)
        ]

    def record_check(
        self,
        exercise: Exercise,
        passed: bool,
        diagnosis: str | None = None,
        path: Path | None = None,
    ) -> tuple[float | None, "InterviewSummary | None"]:
        """Count a check in the progress file and in an interview under way on it;
        ``diagnosis`` (:func:`trainer.history.diagnosis_of`) goes in the study record,
        and a check of an open review's file (``path``) records the review's result.

        Returns the interview's time left and, when this check ended it, its summary.
        """
        if not self.exists:
            return None, None
        from trainer.interview import record_check

        reviewing = path is not None and path == self.review_file(exercise)
        before = self.store.load().progress(exercise.id).review if reviewing else None
        recorded = record_check(self.store, exercise.id, passed, diagnosis, reviewing)
        if before is not None and not before.get("counted"):
            from trainer.review import due_at

            due = due_at(self.store.load().progress(exercise.id))
            if due is not None:
                console.review_result(exercise.id, passed, due)
        return recorded

    def show_notices(self) -> None:
        for message in self.store.notices:
            console.notice(message)
        self.store.notices.clear()
