"""The session: what the command line, the notebook's magics and the Python API work in.

One class, :class:`Session`: the catalogue (with the folders the workspace
remembers), the workspace and its progress file; it starts an exercise, saves a
notebook cell as the scratch file, checks a file and counts the check. It returns
data and never prints: notices wait in :meth:`Session.take_notices`, and what an
opening or a check changed (an interview that ended, a review's result) comes back
as a value for the edge to show — :mod:`trainer.console` for the CLI (through
:mod:`trainer.commands.common`), :mod:`trainer.notebook_view` for the magics.

``command`` is how the learner types a command where the session is used
(``trainer`` in a shell, ``%trainer`` in a notebook): its messages say what to do
next in those terms.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from trainer.catalog import Catalog, folder_feedback, root_of
from trainer.checking.limits import (
    DEFAULT_MEMORY_LIMIT_MB,
    DEFAULT_SEED,
    DEFAULT_TIMEOUT,
)
from trainer.errors import WorkspaceError
from trainer.settings import Settings, load_settings, remember_exercise_dirs
from trainer.spec import Exercise
from trainer.state import STATE_FILE, StateStore
from trainer.workspace import StartResult, Workspace, resolve_workspace, save_scratch

if TYPE_CHECKING:
    from trainer.checking.report import CheckReport
    from trainer.checking.runner import CheckingService
    from trainer.follow_ups import FollowUpCheck
    from trainer.interview import InterviewSummary

NO_WORKSPACE = (
    "no current exercise: there is no workspace at {root} (none in this folder or the "
    "folders above it). Start one with `{command} start sigmoid` (see `{command} list`), "
    "or choose a workspace with --workspace."
)
NO_CURRENT_EXERCISE = (
    "no current exercise in the workspace {root}. Start one with `{command} start sigmoid` "
    "(see `{command} list`), or name it: `{command} check sigmoid`."
)
NO_FILE = "no file at {path}. Run `{command} start {id}` to create it."


@dataclass(frozen=True)
class CheckOptions:
    """How a check runs; every default is :mod:`trainer.checking.limits`'."""

    seed: int = DEFAULT_SEED
    timeout: float = DEFAULT_TIMEOUT
    double_backward: bool = False
    memory_limit_mb: int = DEFAULT_MEMORY_LIMIT_MB
    output_file: Path | None = None  # all the learner's code printed (`check --show-output`)


@dataclass(frozen=True)
class Counted:
    """What counting a check changed in the progress file."""

    interview_left: float | None = None  # seconds left of an interview on the exercise
    interview_ended: InterviewSummary | None = None  # the interview this check ended
    review_due: float | None = None  # after a review's first check: when the next is due
    interview_asked: str | None = None  # the follow-up the interview asked after this pass


@dataclass(frozen=True)
class Checked:
    """A check's report, what counting it changed, and what it says of the exercise's
    follow-ups (None for an exercise without any)."""

    report: CheckReport
    counted: Counted
    follow_up: FollowUpCheck | None = None


class Session:
    """The catalogue, the workspace and its progress file, for one command, magic or call.

    Opening one remembers the exercise folders given (``exercises_dirs``) and ends an
    interview whose time ran out (any command notices it): :attr:`interview_ended`.
    """

    def __init__(
        self,
        workspace: Path | str | None = None,
        exercises_dirs: Sequence[Path] = (),
        *,
        command: str = "trainer",
    ) -> None:
        self.command = command
        self.workspace = Workspace(
            resolve_workspace(Path(workspace) if workspace is not None else None)
        )
        self.store = StateStore(self.workspace.root)
        self._given = list(exercises_dirs)
        settings = load_settings(self.workspace.root) if self.exists else Settings()
        self.store.notices += settings.notices
        self.catalog = Catalog.default([*self._given, *settings.exercise_dirs])
        self.interview_ended: InterviewSummary | None = None
        if self.exists:
            self._remember_exercise_dirs()
            if (self.workspace.root / STATE_FILE).is_file():
                from trainer.interview import expire_if_due

                self.interview_ended = expire_if_due(self.store)

    @property
    def exists(self) -> bool:
        return self.workspace.root.is_dir()

    def take_notices(self) -> list[str]:
        """What could not be read or used (a damaged progress file, a missing folder), once."""
        notices = list(self.store.notices)
        self.store.notices.clear()
        return notices

    def _remember_exercise_dirs(self) -> None:
        if self._given:
            remember_exercise_dirs(self.workspace.root, [root_of(f) for f in self._given])

    # The exercise and its file ----------------------------------------------------------

    def exercise(self, exercise_id: str | None) -> Exercise:
        """The exercise named, else the current one; an error naming the workspace when none."""
        if exercise_id is not None:
            return self.catalog.get(exercise_id)
        root = self.workspace.root
        if not self.exists:
            raise WorkspaceError(NO_WORKSPACE.format(root=root, command=self.command))
        current = self.store.load().current
        if current is None:
            raise WorkspaceError(NO_CURRENT_EXERCISE.format(root=root, command=self.command))
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
            raise WorkspaceError(NO_FILE.format(path=path, command=self.command, id=exercise.id))
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

    # Starting, saving, checking ---------------------------------------------------------

    def start(self, exercise: Exercise, force: bool = False) -> StartResult:
        """Write the scratch file (never over edits without a backup) and make it current."""
        result = self.workspace.start(exercise, force=force)
        self._remember_exercise_dirs()
        from trainer.history import mark_started

        with self.store.update() as state:
            state.current = exercise.id
            mark_started(state, exercise.id)
        return result

    def save_cell(self, exercise: Exercise, source: str) -> tuple[Path, Path | None]:
        """Make a notebook cell's ``source`` the scratch file, atomically, and the exercise
        current; returns the file and the previous version's backup (None: none made)."""
        text = source if source.endswith("\n") else source + "\n"
        _, backup = save_scratch(self.workspace, exercise, text)
        if exercise.id != self.store.load().current:
            with self.store.update() as state:
                state.current = exercise.id
        return self.workspace.scratch_path(exercise.id), backup

    def check(
        self,
        exercise: Exercise,
        path: Path,
        options: CheckOptions | None = None,
        *,
        service: CheckingService | None = None,
    ) -> Checked:
        """Check ``path`` in the isolated checker and count the check. With ``service``
        the check is one more job of a running server; without, one is started for it."""
        from trainer.checking.runner import run_check
        from trainer.history import diagnosis_of

        options = options or CheckOptions()
        exercise = self.checked_exercise(exercise)
        report = run_check(
            exercise,
            path,
            seed=options.seed,
            timeout=options.timeout,
            solution=self.catalog.solution_path(exercise),
            double_backward=options.double_backward,
            service=service,
            memory_limit_mb=options.memory_limit_mb,
            feedback=folder_feedback(exercise),
            output_file=options.output_file,
        )
        if report.bug is not None:  # a bug of ours is no check of the learner's
            return Checked(report, Counted())
        counted = self.record_check(exercise, report.passed, diagnosis_of(report), path)
        if not exercise.follow_ups or not self.exists:
            return Checked(report, counted)
        from trainer.follow_ups import after_check, record

        record(self.store, exercise, report.passed)
        progress = self.store.load().progress(exercise.id)
        return Checked(
            report, counted, after_check(exercise, report, progress, counted.interview_asked)
        )

    def checked_exercise(self, exercise: Exercise) -> Exercise:
        """``exercise`` as a check of it is sent: with the follow-up it grades active (the
        one taken up; during an interview on it, the interview's own, none before its pass)."""
        if not exercise.follow_ups or not (self.workspace.root / STATE_FILE).is_file():
            return exercise
        from trainer.follow_ups import checked_exercise

        state = self.store.load()
        interview = state.interview
        interviewing = interview is not None and interview.exercise == exercise.id
        return checked_exercise(
            exercise,
            state.progress(exercise.id),
            interviewing=interviewing,
            interview_follow_up=interview.follow_up if interview is not None else None,
        )

    def record_check(
        self,
        exercise: Exercise,
        passed: bool,
        diagnosis: str | None = None,
        path: Path | None = None,
    ) -> Counted:
        """Count a check in the progress file and in an interview under way on it;
        ``diagnosis`` (:func:`trainer.history.diagnosis_of`) goes in the study record,
        and a check of an open review's file (``path``) records the review's result."""
        if not self.exists:
            return Counted()
        from trainer.interview import record_check

        reviewing = path is not None and path == self.review_file(exercise)
        before = self.store.load().progress(exercise.id).review if reviewing else None
        follow_ups = [f.id for f in exercise.follow_ups]
        interview = record_check(self.store, exercise.id, passed, diagnosis, reviewing, follow_ups)
        due = None
        if before is not None and not before.get("counted"):
            from trainer.review import due_at

            due = due_at(self.store.load().progress(exercise.id))
        return Counted(interview.left, interview.ended, due, interview.asked)

    # The catalogue, in the order of `trainer list` -------------------------------------

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
