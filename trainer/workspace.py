"""The learner's workspace: scratch files and their backups.

Nothing here ever loses a learner's edits: a scratch file that differs from the
stub is only replaced after a timestamped copy is kept in ``.backups/``.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from trainer.errors import WorkspaceError
from trainer.spec import Exercise

WORKSPACE_ENV = "TRAINER_WORKSPACE"
DEFAULT_WORKSPACE = "trainer-workspace"
BACKUPS = ".backups"


def resolve_workspace(option: Path | None) -> Path:
    """``--workspace``, else ``$TRAINER_WORKSPACE``, else ``./trainer-workspace``."""
    if option is not None:
        return option.expanduser()
    from_env = os.environ.get(WORKSPACE_ENV)
    if from_env:
        return Path(from_env).expanduser()
    return Path.cwd() / DEFAULT_WORKSPACE


@dataclass
class StartResult:
    path: Path
    created: bool  # a fresh stub was written
    kept_edits: bool  # an edited file was left as it was
    backup: Path | None = None


class Workspace:
    def __init__(self, root: Path) -> None:
        self.root = root

    def ensure(self) -> Path:
        """Create the workspace folder (not its parents) and check it can be written."""
        if not self.root.parent.is_dir():
            raise WorkspaceError(
                f"cannot create the workspace {self.root}: the folder {self.root.parent} does not "
                "exist. Create it, or choose another with --workspace."
            )
        try:
            self.root.mkdir(exist_ok=True)
        except OSError as error:
            raise WorkspaceError(
                f"cannot create the workspace {self.root}: {error.strerror}. "
                "Choose another with --workspace."
            ) from None
        if not _writable(self.root):
            raise WorkspaceError(
                f"the workspace {self.root} is not writable. Fix its permissions, "
                "or choose another with --workspace."
            )
        return self.root

    def scratch_path(self, exercise_id: str) -> Path:
        return self.root / f"{exercise_id}.py"

    def backup(self, path: Path, exercise_id: str) -> Path:
        folder = self.root / BACKUPS
        folder.mkdir(exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        target = folder / f"{exercise_id}-{stamp}.py"
        counter = 1
        while target.exists():
            target = folder / f"{exercise_id}-{stamp}-{counter}.py"
            counter += 1
        target.write_bytes(path.read_bytes())
        return target

    def start(self, exercise: Exercise, force: bool = False) -> StartResult:
        self.ensure()
        path = self.scratch_path(exercise.id)
        if path.exists():
            if _same_text(path.read_bytes(), exercise.stub):
                return StartResult(path=path, created=False, kept_edits=False)
            if not force:
                return StartResult(path=path, created=False, kept_edits=True)
            backup = self.backup(path, exercise.id)
            write_atomically(path, exercise.stub)
            return StartResult(path=path, created=True, kept_edits=False, backup=backup)
        write_atomically(path, exercise.stub)
        return StartResult(path=path, created=True, kept_edits=False)


def _writable(folder: Path) -> bool:
    return os.access(folder, os.W_OK | os.X_OK)


def _same_text(raw: bytes, text: str) -> bool:
    try:
        decoded = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        return False
    return decoded.replace("\r\n", "\n") == text


def write_atomically(path: Path, text: str) -> None:
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}-", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def reset_scratch(workspace: Workspace, exercise: Exercise) -> tuple[Path, Path | None]:
    """Put the stub back; the current file is backed up first unless it is the stub already."""
    workspace.ensure()
    path = workspace.scratch_path(exercise.id)
    backup = None
    if path.exists() and not _same_text(path.read_bytes(), exercise.stub):
        backup = workspace.backup(path, exercise.id)
    write_atomically(path, exercise.stub)
    return path, backup


def save_scratch(workspace: Workspace, exercise: Exercise, text: str) -> tuple[Path, Path | None]:
    """Make ``text`` the scratch file, atomically (a notebook cell being checked).

    The previous version is backed up first, as :func:`reset_scratch` does, unless it
    is the stub or already ``text``: a re-check of the same cell makes no new copy.
    """
    workspace.ensure()
    path = workspace.scratch_path(exercise.id)
    backup = None
    if path.exists():
        raw = path.read_bytes()
        if not _same_text(raw, text) and not _same_text(raw, exercise.stub):
            backup = workspace.backup(path, exercise.id)
    write_atomically(path, text)
    return path, backup
