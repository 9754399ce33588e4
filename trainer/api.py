"""The trainer from Python: ``from trainer import check``, for scripts and notebooks alike.

``check("sigmoid", MySigmoid)`` takes a class, a source string or a path and
returns a :class:`Report`. Every check goes through the same isolated checker
as ``trainer check`` (:func:`trainer.checking.runner.run_check`): the learner's
code never runs in this process. The first check starts a checking server that
the process keeps for its life (a notebook's kernel); later checks are forks of
it and take a fraction of a second. It ends when the process does.

No torch here, and nothing of IPython: :mod:`trainer.notebook` adds the magics.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainer.catalog import Catalog, folder_feedback
from trainer.class_source import source_of_class
from trainer.errors import TrainerError, WorkspaceError
from trainer.history import diagnosis_of
from trainer.spec import Exercise
from trainer.state import StateStore
from trainer.workspace import Workspace, resolve_workspace, save_scratch

if TYPE_CHECKING:
    from trainer.checking.report import CheckReport, StageResult
    from trainer.checking.runner import CheckingService

DEFAULT_SEED = 0
DEFAULT_TIMEOUT = 30.0

NO_CURRENT_EXERCISE = (
    "no current exercise in this workspace. Start one with `%trainer start sigmoid` "
    "(see `%trainer list`), or name it: `%trainer hint sigmoid`."
)


@dataclass(frozen=True)
class Diagnosis:
    """What is wrong, in words: the first failing stage and the mistake it looks like."""

    stage: str  # the stage's title, e.g. "Backward parity"
    message: str
    details: tuple[str, ...] = ()
    mistake: str | None = None  # the classic mistake's name, e.g. "no_grad_output"
    input: str | None = None  # the forward parameter whose gradient is wrong

    def __str__(self) -> str:
        return "\n".join([f"{self.stage}: {self.message}", *self.details])


class Report:
    """A check's verdict, readable in a notebook (an HTML table) and as plain text.

    Wraps the :class:`~trainer.checking.report.CheckReport` that ``trainer check
    --json`` prints (``.raw``); ``warm`` says whether a running checking server
    took the check (True from the second check of a process on).
    """

    def __init__(
        self, raw: CheckReport, *, warm: bool, advice: str = "", startup: float = 0.0
    ) -> None:
        self.raw = raw
        self.warm = warm
        self.advice = advice  # what to do next, in the terms of where the check ran
        self.startup = startup  # seconds spent starting the checking server (a cold check)

    @property
    def passed(self) -> bool:
        return self.raw.passed

    @property
    def stages(self) -> list[StageResult]:
        return self.raw.stages

    @property
    def exercise(self) -> str:
        return self.raw.exercise

    @property
    def seconds(self) -> float:
        """The wait for the verdict, the server's start included."""
        return round(self.raw.seconds + self.startup, 3)

    @property
    def failure(self) -> StageResult | None:
        """The first stage that failed, or None."""
        return self.raw.first_failure

    @property
    def diagnosis(self) -> Diagnosis | None:
        """What is wrong (None after a pass)."""
        failure = self.raw.first_failure
        if failure is None:
            return None
        found = failure.diagnosis or {}
        mistake, name = found.get("mistake"), found.get("input")
        return Diagnosis(
            stage=failure.title,
            message=failure.message,
            details=tuple(failure.details),
            mistake=str(mistake) if mistake else None,
            input=str(name) if name else None,
        )

    def pictures(self) -> list[object]:
        """Pictures of the wrong gradients, for a notebook to display: matplotlib figures
        where matplotlib is installed, else text (braille dots)."""
        from trainer.notebook_view import picture_views

        return picture_views(self.stages)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of ``trainer check --json``, plus ``warm``."""
        return {**self.raw.to_dict(), "warm": self.warm, "startup_seconds": self.startup}

    def __str__(self) -> str:
        from trainer.notebook_view import report_text

        return report_text(self)

    def __repr__(self) -> str:
        verdict = "passed" if self.passed else "failed"
        failure = self.raw.first_failure
        where = f", first failure: {failure.title}" if failure is not None else ""
        return f"<Report {self.exercise}: {verdict}{where}; print() it for every stage>"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """IPython's plain-text display: the whole report, not the one-line repr."""
        printer.text(repr(self) if cycle else str(self))

    def _repr_html_(self) -> str:
        from trainer.notebook_view import report_html

        return report_html(self)


# The warm checking server of this process ------------------------------------------


class _Warm:
    """One checking server for the life of the process, started by the first check."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._service: CheckingService | None = None
        self._registered = False

    def get(self) -> tuple[CheckingService, bool]:
        """The server, and whether it was running before this call."""
        from trainer.checking.runner import CheckingService

        with self._lock:
            if self._service is not None:
                return self._service, True
            if not self._registered:
                atexit.register(self.close)
                self._registered = True
            # Ctrl-C waits for the start (seconds: torch is imported), so that no server
            # is left running that this process has no handle on.
            with interrupts_held():
                self._service = CheckingService()
            return self._service, False

    def close(self) -> None:
        """Stop the server; it ends every checker and learner process it started."""
        with self._lock:
            service, self._service = self._service, None
        if service is not None:
            service.close()


WARM = _Warm()


def close_service() -> None:
    """End this process's checking server now (it also ends on its own at exit)."""
    WARM.close()


# What the API and the magics share ----------------------------------------------------


class Session:
    """The catalogue, the workspace and its progress file (the CLI's ``_Context`` for Python)."""

    def __init__(self, workspace: Path | str | None = None) -> None:
        self.catalog = Catalog.default()
        self.workspace = Workspace(
            resolve_workspace(Path(workspace) if workspace is not None else None)
        )
        self.store = StateStore(self.workspace.root)

    def exercise(self, exercise_id: str | None) -> Exercise:
        if exercise_id is not None:
            return self.catalog.get(exercise_id)
        current = self.store.load().current if self.workspace.root.is_dir() else None
        if current is None:
            raise TrainerError(NO_CURRENT_EXERCISE)
        return self.catalog.get(current)

    def record_check(self, exercise: Exercise, passed: bool, diagnosis: str | None = None) -> None:
        """Count a check in the progress file (and an interview under way), as the CLI does."""
        if not self.workspace.root.is_dir():
            return
        from trainer.interview import record_check

        record_check(self.store, exercise.id, passed, diagnosis)

    def check_file(
        self,
        exercise: Exercise,
        path: Path,
        *,
        seed: int = DEFAULT_SEED,
        timeout: float = DEFAULT_TIMEOUT,
        double_backward: bool = False,
        cell: bool = False,
    ) -> Report:
        """Check ``path`` on this process's warm server and count the check.

        ``cell``: the file is a notebook cell's (the advice says to fix the cell)."""
        from trainer.checking.runner import run_check

        started = time.monotonic()
        service, warm = WARM.get()
        startup = 0.0 if warm else time.monotonic() - started
        try:
            raw = run_check(
                exercise,
                path,
                seed=seed,
                timeout=timeout,
                solution=self.catalog.solution_path(exercise),
                double_backward=double_backward,
                service=service,
                feedback=folder_feedback(exercise),
            )
        except KeyboardInterrupt:
            # Cut short between two frames, the server's bookkeeping may be off by one
            # job: stop it (with every process of the check); the next check starts afresh.
            WARM.close()
            raise
        if raw.bug is None:  # a bug of ours is no check of the learner's
            self.record_check(exercise, raw.passed, diagnosis_of(raw))
        return Report(raw, warm=warm, advice=_advice(raw, cell), startup=startup)

    def check_cell(
        self,
        exercise: Exercise,
        source: str,
        *,
        seed: int = DEFAULT_SEED,
        timeout: float = DEFAULT_TIMEOUT,
        double_backward: bool = False,
    ) -> tuple[Report, Path | None]:
        """Make ``source`` the scratch file and check it; returns the report and the backup.

        The file is complete before the check begins, and an interrupt cannot cut
        its writing short: it waits until the file is in place.
        """
        text = source if source.endswith("\n") else source + "\n"
        with interrupts_held():
            _, backup = save_scratch(self.workspace, exercise, text)
        path = self.workspace.scratch_path(exercise.id)
        if exercise.id != self.store.load().current:
            with self.store.update() as state:
                state.current = exercise.id
        report = self.check_file(
            exercise, path, seed=seed, timeout=timeout, double_backward=double_backward, cell=True
        )
        return report, backup


def _in_ipython() -> bool:
    shell = sys.modules.get("IPython")
    return shell is not None and getattr(shell, "get_ipython", lambda: None)() is not None


def _advice(raw: CheckReport, cell: bool) -> str:
    name = raw.exercise
    if cell:
        if raw.passed:
            return f"Lock in the concepts: `%trainer quiz {name}`."
        return f"Fix the cell and run it again; stuck? `%trainer hint {name}`."
    if _in_ipython():
        hint, quiz = f"`%trainer hint {name}`", f"`%trainer quiz {name}`"
    else:
        hint, quiz = f"`trainer hint {name}`", f"`trainer quiz {name}`"
    if raw.passed:
        return f"Lock in the concepts: {quiz}."
    return f"Fix it and check again; stuck? {hint}."


@contextlib.contextmanager
def interrupts_held() -> Iterator[None]:
    """Hold Ctrl-C (a kernel interrupt) until the block ends, then raise it.

    Only the main thread receives signals; elsewhere this does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda number, _frame: caught.append(number))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt


# The API -------------------------------------------------------------------------------


def check(
    exercise: str,
    solution: type | str | os.PathLike[str],
    *,
    seed: int = DEFAULT_SEED,
    timeout: float = DEFAULT_TIMEOUT,
    double_backward: bool = False,
    workspace: Path | str | None = None,
) -> Report:
    """Check a solution of ``exercise`` in an isolated process and return the report.

    ``solution`` is a class (its source and its module's imports are checked), a
    source string (any string with a line break), or a path to a ``.py`` file.
    The check counts in the workspace's progress, as ``trainer check`` does.

    Example: ``check("sigmoid", MySigmoid).passed``
    """
    session = Session(workspace)
    found = session.catalog.get(exercise)
    options: dict[str, Any] = {
        "seed": seed,
        "timeout": timeout,
        "double_backward": double_backward,
    }
    if isinstance(solution, type):
        name, source = source_of_class(solution, found.id)
        return _check_source(session, found, name, source, options)
    if isinstance(solution, str) and "\n" in solution:
        return _check_source(session, found, f"{found.id}.py", solution, options)
    if not isinstance(solution, str | os.PathLike):
        raise TrainerError(
            f"check() takes a class, a source string or a path, not {type(solution).__name__}."
        )
    path = Path(solution).expanduser()
    if not path.is_file():
        raise WorkspaceError(
            f"no file at {path}. Pass a path to a .py file, the class itself, or its source "
            "as a string (with at least one line break)."
        )
    return session.check_file(found, path, **options)


def _check_source(
    session: Session, exercise: Exercise, name: str, source: str, options: dict[str, Any]
) -> Report:
    """Check source that has no file: it gets one of its own for the check's length."""
    folder = Path(tempfile.mkdtemp(prefix="trainer-check-"))
    try:
        path = folder / name
        path.write_text(source, encoding="utf-8")
        return session.check_file(exercise, path, **options)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
