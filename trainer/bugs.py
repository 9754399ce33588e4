"""Bugs of ours, kept apart from the learner's mistakes and the user's problems.

A learner's wrong code is a verdict (exit 1); a problem the user can fix is a
:class:`~trainer.errors.TrainerError` (exit 2). A bug of the trainer's own, in a
stage, the checker, the checking server, a learner-side request handler or the
CLI, is neither: it is said in its own words (:data:`BUG_WORDS`), its traceback
is written to a file for a bug report, and the command exits with
:attr:`~trainer.errors.ExitCode.CHECKER_BUG` (3). It never fails a stage.

Only the CLI's process writes these files: the checker and the checking server
send their tracebacks on, and the learner's process, which may not write files,
sends its own in its reply.
"""

from __future__ import annotations

import datetime
import os
import platform
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

BUG_WORDS = "the checker hit a bug; this is not your mistake"
# Where the bug reports go: this folder, else `trainer-bug-reports` in the temporary folder.
BUG_REPORTS_ENV = "TRAINER_BUG_REPORTS"


class CheckerBugError(Exception):
    """A bug of ours that ended a command: where it happened, and its traceback."""

    def __init__(self, where: str, traceback: str) -> None:
        super().__init__(f"{where}: {last_line(traceback)}")
        self.where = where
        self.traceback = traceback


def last_line(traceback: str) -> str:
    """The exception a traceback ends with, ``Name: message`` (its last line)."""
    lines = [line for line in traceback.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else "no traceback"


def bug_reports_folder() -> Path:
    given = os.environ.get(BUG_REPORTS_ENV)
    return Path(given) if given else Path(tempfile.gettempdir()) / "trainer-bug-reports"


def write_bug_report(
    where: str, traceback: str, about: Mapping[str, str] | None = None
) -> Path | None:
    """Write the traceback, with what a bug report needs (versions, where, ``about``:
    the exercise, the file...), to a new file; its path, or None when none can be written."""
    from trainer import __version__

    try:
        torch_version = _version("torch")
        now = datetime.datetime.now()
        lines = [
            f"trainer {__version__}: {BUG_WORDS}.",
            f"where: {where}",
            f"when: {now.isoformat(timespec='seconds')}",
            f"python: {sys.version.split()[0]} ({platform.platform()})",
            f"torch: {torch_version}",
            *(f"{key}: {value}" for key, value in (about or {}).items()),
            "",
            traceback.rstrip(),
            "",
        ]
        folder = bug_reports_folder()
        folder.mkdir(parents=True, exist_ok=True)
        stamp = now.strftime("%Y%m%d-%H%M%S")
        handle, name = tempfile.mkstemp(prefix=f"bug-{stamp}-", suffix=".txt", dir=folder)
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write("\n".join(lines))
    except OSError:
        return None
    return Path(name)


def bug_message(where: str, path: Path | str | None, error: str = "") -> str:
    """What a user reads of a bug of ours: the words, where (and the exception), and what
    to do: report it with the traceback's file, whose path ends the message."""
    what = f"{where}: {error}" if error else where
    kept = (
        f"Please report it with its traceback, kept in {path}"
        if path
        else "Its traceback could not be written to a file."
    )
    return f"{BUG_WORDS} (in {what}). {kept}"


def _version(distribution: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"
