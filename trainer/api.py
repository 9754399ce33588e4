"""The trainer from Python: ``from trainer import check``, for scripts and notebooks alike.

``check("sigmoid", MySigmoid)`` takes a class, a source string or a path and
returns a :class:`Report`. Every check goes through the same isolated checker
as ``trainer check`` (:func:`trainer.checking.runner.run_check`): the learner's
code never runs in this process. The first check starts a checking server that
the process keeps for its life (a notebook's kernel); later checks are forks of
it and take a fraction of a second. It ends when the process does.

The checks go through the one core session (:class:`trainer.session.Session`) that
the CLI and the magics use too; this module adds the process's warm server and the
:class:`Report` a notebook displays. No torch here, and nothing of IPython:
:mod:`trainer.notebook` adds the magics.
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

from trainer.checking.limits import DEFAULT_SEED, DEFAULT_TIMEOUT
from trainer.class_source import source_of_class
from trainer.errors import TrainerError, WorkspaceError
from trainer.explain import first_pass_derivation
from trainer.session import CheckOptions, Session
from trainer.spec import Exercise

if TYPE_CHECKING:
    from trainer.checking.report import CheckReport, StageResult, VerdictSentence
    from trainer.checking.runner import CheckingService
    from trainer.follow_ups import FollowUpCheck

__all__ = [
    "CheckOptions",
    "Diagnosis",
    "Report",
    "Session",
    "check",
    "check_cell",
    "check_file",
    "close_service",
    "interrupts_held",
]


@dataclass(frozen=True)
class Diagnosis:
    """What is wrong, in words: the first failing stage and the mistake it looks like
    (``report.diagnosis``). The checker's own record of a mistake it recognised is
    :class:`trainer.checking.trusted.diagnosis.NamedMistake`, in the stage's JSON."""

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
        self,
        raw: CheckReport,
        *,
        warm: bool,
        advice: str = "",
        startup: float = 0.0,
        derivation: str | None = None,
        follow_up: FollowUpCheck | None = None,
    ) -> None:
        self.raw = raw
        # The interviewer's follow-ups (None for an exercise without any): the one this
        # check graded (``.graded``), its stages (``.stages``) and verdict (``.passed``),
        # how many are left (``.left``), the one an interview just asked (``.asked``).
        self.follow_up = follow_up
        # The exercise's worked derivation (math, no code) on its first pass, else None.
        self.derivation = derivation
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
    def verdict_sentence(self) -> VerdictSentence:
        """The verdict in one sentence (``str()`` it), as the CLI and the notebook say it."""
        return self.raw.verdict_sentence(self.seconds)

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
        """The JSON form of ``trainer check --json``, plus ``warm`` and ``follow_up``."""
        follow_up = self.follow_up.to_dict() if self.follow_up is not None else None
        return {
            **self.raw.to_dict(),
            "warm": self.warm,
            "startup_seconds": self.startup,
            "follow_up": follow_up,
        }

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


# Checks on the warm server: what the API and the magics share --------------------------


def check_file(
    session: Session,
    exercise: Exercise,
    path: Path,
    options: CheckOptions | None = None,
    *,
    cell: bool = False,
) -> Report:
    """Check ``path`` on this process's warm server and count the check in ``session``.

    ``cell``: the file is a notebook cell's (the advice says to fix the cell)."""
    started = time.monotonic()
    service, warm = WARM.get()
    startup = 0.0 if warm else time.monotonic() - started
    try:
        checked = session.check(exercise, path, options, service=service)
    except KeyboardInterrupt:
        # Cut short between two frames, the server's bookkeeping may be off by one
        # job: stop it (with every process of the check); the next check starts afresh.
        WARM.close()
        raise
    raw = checked.report
    return Report(
        raw,
        warm=warm,
        advice=_advice(raw, session.command, cell, checked.follow_up),
        startup=startup,
        derivation=first_pass_derivation(session.store, exercise, raw.passed),
        follow_up=checked.follow_up,
    )


def check_cell(
    session: Session, exercise: Exercise, source: str, options: CheckOptions | None = None
) -> tuple[Report, Path | None]:
    """Make ``source`` the scratch file and check it; returns the report and the backup.

    The file is complete before the check begins, and an interrupt cannot cut
    its writing short: it waits until the file is in place.
    """
    with interrupts_held():
        path, backup = session.save_cell(exercise, source)
    return check_file(session, exercise, path, options, cell=True), backup


def _in_ipython() -> bool:
    shell = sys.modules.get("IPython")
    return shell is not None and getattr(shell, "get_ipython", lambda: None)() is not None


def _advice(
    raw: CheckReport, command: str, cell: bool, follow_up: FollowUpCheck | None = None
) -> str:
    """What to do next, in the terms of where the check ran (``command``: how a command
    is typed there, ``trainer`` or ``%trainer``): after a pass, a follow-up passed and
    the next one waiting first, as ``trainer check`` says them."""
    name = raw.exercise
    if raw.passed:
        words = []
        if follow_up is not None and follow_up.graded is not None and follow_up.passed:
            words.append(f"Follow-up {follow_up.graded.id} passed.")
        if follow_up is not None and follow_up.asked is not None:
            words.append(
                f"The interviewer asks a follow-up, {follow_up.asked.id} "
                f"(`{command} followup {name}` shows it again): every check grades it from now on."
            )
            return " ".join(words)
        if follow_up is not None and follow_up.waiting:
            words.append(
                f"The interviewer has a follow-up question ({follow_up.left} left): "
                f"`{command} followup {name}`."
            )
        return " ".join([*words, f"Lock in the concepts: `{command} quiz {name}`."])
    again = "Fix the cell and run it again" if cell else "Fix it and check again"
    return f"{again}; stuck? `{command} hint {name}`."


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
    session = Session(workspace, command="%trainer" if _in_ipython() else "trainer")
    found = session.catalog.get(exercise)
    options = CheckOptions(seed=seed, timeout=timeout, double_backward=double_backward)
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
    return check_file(session, found, path, options)


def _check_source(
    session: Session, exercise: Exercise, name: str, source: str, options: CheckOptions
) -> Report:
    """Check source that has no file: it gets one of its own for the check's length."""
    folder = Path(tempfile.mkdtemp(prefix="trainer-check-"))
    try:
        path = folder / name
        path.write_text(source, encoding="utf-8")
        return check_file(session, exercise, path, options)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
