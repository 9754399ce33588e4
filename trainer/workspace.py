"""The learner's workspace: where it is, its scratch files and their backups.

Nothing here ever loses a learner's edits: a scratch file that differs from the
stub is only replaced after a timestamped copy is kept in ``.backups/``.
"""

from __future__ import annotations

import os
import textwrap
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from trainer.errors import WorkspaceError
from trainer.files import write_atomically
from trainer.settings import SETTINGS_FILE
from trainer.spec import Exercise, reflow
from trainer.state import LOCK_FILE, STATE_FILE

WORKSPACE_ENV = "TRAINER_WORKSPACE"
DEFAULT_WORKSPACE = "trainer-workspace"
BACKUPS = ".backups"
# An interview's own files: `interview/EX.py`, so that a solved EX.py is left alone.
INTERVIEWS = "interview"
HEADER_WIDTH = 79  # the statement at the top of a scratch file fits an 80-column editor
# Written once into a new workspace, never over the user's own: a workspace committed to
# git (a Classroom template's stubs) commits the scratch files and not the bookkeeping.
GITIGNORE = f"""\
# Written by trainer: the workspace's bookkeeping stays out of git (progress, its
# lock, remembered folders with this machine's paths, backups); EX.py files go in.
{STATE_FILE}
{LOCK_FILE}
{STATE_FILE}.broken-*
{SETTINGS_FILE}
{BACKUPS}/
.output/
"""


def resolve_workspace(option: Path | None = None, start: Path | None = None) -> Path:
    """``--workspace``, else ``$TRAINER_WORKSPACE``, else the nearest workspace found by
    walking up from ``start`` (the working folder) as git does, else ``./trainer-workspace``.

    A folder is a workspace when it holds the progress or settings file; a
    ``trainer-workspace/`` folder met on the way up is one too. So the commands
    work alike from the folder that holds the workspace, from inside it and from
    any folder below either.
    """
    if option is not None:
        return option.expanduser()
    from_env = os.environ.get(WORKSPACE_ENV)
    if from_env:
        return Path(from_env).expanduser()
    here = (start or Path.cwd()).absolute()
    for folder in (here, *here.parents):
        if is_workspace(folder):
            return folder
        if (folder / DEFAULT_WORKSPACE).is_dir():
            return folder / DEFAULT_WORKSPACE
    return here / DEFAULT_WORKSPACE


def editor_command() -> list[str] | None:
    """The learner's editor: ``$VISUAL``, else ``$EDITOR`` (with its arguments), else None."""
    import shlex  # only `trainer open` needs it

    for variable in ("VISUAL", "EDITOR"):
        value = os.environ.get(variable, "").strip()
        if value:
            return shlex.split(value)
    return None


def is_workspace(folder: Path) -> bool:
    return (folder / STATE_FILE).is_file() or (folder / SETTINGS_FILE).is_file()


@dataclass
class StartResult:
    path: Path
    kept_edits: bool  # an edited file was left as it was
    backup: Path | None = None


def scratch_text(exercise: Exercise, reflowed: bool = True) -> str:
    """What ``trainer start`` writes: the statement as a comment, then the spec's stub.

    A comment (not a docstring) so that no statement text can break the file:
    the checker loads it as it loads the bare stub. The statement is reflowed, then
    wrapped once to fit an 80-column editor (``reflowed=False``: as earlier trainers
    wrote it, wrapping the spec's own lines again).
    """
    lines = [f"{exercise.id}: {exercise.title}", ""]
    statement = reflow(exercise.statement) if reflowed else exercise.statement
    for line in statement.strip().splitlines():
        indent = line[: len(line) - len(line.lstrip())]
        bullet = indent + ("  " if line.lstrip().startswith(("- ", "* ")) else "")
        wrapped = textwrap.wrap(
            line,
            HEADER_WIDTH - 2,
            subsequent_indent=bullet,
            break_long_words=False,
            break_on_hyphens=False,
        )
        lines += wrapped or [""]
    lines += [
        "",
        f"Check it with `trainer check {exercise.id}`; stuck? `trainer hint {exercise.id}`.",
    ]
    header = "\n".join(f"# {line}".rstrip() for line in lines)
    return f"{header}\n\n{exercise.stub}"


def stub_texts(exercise: Exercise) -> tuple[str, ...]:
    """Every text ``trainer start`` has written for the exercise: this trainer's, an
    earlier one's (the statement wrapped twice) and the bare stub."""
    return (scratch_text(exercise), scratch_text(exercise, reflowed=False), exercise.stub)


def is_untouched(raw: bytes, exercise: Exercise) -> bool:
    """The file is what ``trainer start`` wrote (or what an earlier trainer wrote)."""
    return any(_same_text(raw, text) for text in stub_texts(exercise))


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
        ignore = self.root / ".gitignore"
        if not ignore.exists():
            write_atomically(ignore, GITIGNORE)
        return self.root

    def scratch_path(self, exercise_id: str) -> Path:
        return self.root / f"{exercise_id}.py"

    def interview_path(self, exercise_id: str) -> Path:
        """The file an interview on ``exercise_id`` is written in."""
        return self.root / INTERVIEWS / f"{exercise_id}.py"

    def start_interview(self, exercise: Exercise) -> StartResult:
        """A fresh stub in the interview's own file; the scratch file is left as it is.
        An edited file from an earlier interview is backed up first."""
        self.ensure()
        path = self.interview_path(exercise.id)
        path.parent.mkdir(exist_ok=True)
        backup = None
        if path.exists() and not is_untouched(path.read_bytes(), exercise):
            backup = self.backup(path, exercise.id)
        write_atomically(path, scratch_text(exercise))
        return StartResult(path=path, kept_edits=False, backup=backup)

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
            if is_untouched(path.read_bytes(), exercise):
                return StartResult(path=path, kept_edits=False)
            if not force:
                return StartResult(path=path, kept_edits=True)
            backup = self.backup(path, exercise.id)
            write_atomically(path, scratch_text(exercise))
            return StartResult(path=path, kept_edits=False, backup=backup)
        write_atomically(path, scratch_text(exercise))
        return StartResult(path=path, kept_edits=False)

    def scratch_files(self, exercises: Sequence[Exercise]) -> list[tuple[Exercise, Path]]:
        """The exercises that have a scratch file here, in catalogue order."""
        found = [(e, self.scratch_path(e.id)) for e in exercises]
        return [(e, p) for e, p in found if p.is_file()]


def _writable(folder: Path) -> bool:
    return os.access(folder, os.W_OK | os.X_OK)


def _same_text(raw: bytes, text: str) -> bool:
    try:
        decoded = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        return False
    return decoded.replace("\r\n", "\n") == text


def reset_scratch(workspace: Workspace, exercise: Exercise) -> tuple[Path, Path | None]:
    """Put the stub back; the current file is backed up first unless it is the stub already."""
    workspace.ensure()
    path = workspace.scratch_path(exercise.id)
    backup = None
    if path.exists() and not is_untouched(path.read_bytes(), exercise):
        backup = workspace.backup(path, exercise.id)
    write_atomically(path, scratch_text(exercise))
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
        if not _same_text(raw, text) and not is_untouched(raw, exercise):
            backup = workspace.backup(path, exercise.id)
    write_atomically(path, text)
    return path, backup


def reset_all(
    workspace: Workspace, exercises: Sequence[Exercise]
) -> list[tuple[Exercise, Path, Path | None]]:
    """:func:`reset_scratch` for every scratch file of the workspace; every edit is backed up."""
    return [
        (exercise, *reset_scratch(workspace, exercise))
        for exercise, _ in workspace.scratch_files(exercises)
    ]
