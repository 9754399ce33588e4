"""Grade a class: check many submissions of one exercise in parallel, isolated as `check` does.

The scores and the gradebook's formats are in :mod:`trainer.gradebook`.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from trainer.catalog import solution_path
from trainer.checking.feedback import DEFAULT_FEEDBACK
from trainer.checking.limits import DEFAULT_TIMEOUT
from trainer.checking.report import ProtectionLevel
from trainer.checking.runner import CheckingService, run_check
from trainer.errors import TrainerError
from trainer.flags import Flag, copy_flags, not_run, placement_flags
from trainer.gradebook import Grade, Gradebook, error_grade, grade_of
from trainer.spec import Exercise
from trainer.workspace import stub_texts

T = TypeVar("T")


@dataclass(frozen=True)
class Submission:
    path: Path  # as given, or as found in a folder given
    folder: Path  # the class folder it belongs in: the folder given, or a file's own folder


def collect_submissions(paths: Sequence[Path]) -> list[Submission]:
    """Files as given, and the .py files inside folders (sorted), links included: a linked
    file or folder is flagged, its files never run. A missing path is an error."""
    found: list[Submission] = []
    for path in paths:
        if path.is_file() or path.is_symlink():
            found.append(Submission(path, path.parent))
        elif path.is_dir():
            found += [Submission(p, path) for p in sorted(_python_files(path))]
        else:
            raise TrainerError(f"no file or folder at {path}. Check the paths given to grade.")
    if not found:
        raise TrainerError("no .py submissions found in the paths given. Check the paths.")
    return found


def _python_files(folder: Path) -> list[Path]:
    """The .py files under ``folder``, through linked folders too (each real folder once)."""
    files = []
    seen = set()
    for top, folders, names in os.walk(folder, followlinks=True):
        real = os.path.realpath(top)
        if real in seen:
            folders.clear()
            continue
        seen.add(real)
        files += [Path(top, name) for name in names if name.endswith(".py")]
    return files


def class_flags(exercise: Exercise, submissions: Sequence[Submission]) -> list[list[Flag]]:
    """Each submission's flags, over the whole class (every shard finds the same): a
    symlink or a file outside its folder (never read), a copy of the reference solution
    or of another submission, whitespace and comments aside."""
    flags = [placement_flags(s.path, s.folder) for s in submissions]
    texts = {}
    for index, submission in enumerate(submissions):
        if not flags[index]:
            try:
                texts[index] = submission.path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue  # its check says why it cannot be read
    try:
        reference: str | None = solution_path(exercise).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        reference = None
    names = [str(s.path) for s in submissions]
    stubs = stub_texts(exercise)
    for index, found in copy_flags(texts, names, reference, stubs).items():
        flags[index] += found
    return flags


def shard_of(submissions: Sequence[T], shard: tuple[int, int]) -> list[tuple[int, T]]:
    """The share of shard ``K/N``: the submissions at places K-1, K-1+N, K-1+2N... of the
    list (with their places), so that N shards cover the class exactly once and evenly."""
    index, count = shard
    return [(i, path) for i, path in enumerate(submissions) if i % count == index - 1]


def parse_shard(text: str) -> tuple[int, int]:
    """``"K/N"`` -> ``(K, N)`` with 1 <= K <= N; anything else is a usage error."""
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if match is None or not 1 <= int(match[1]) <= int(match[2]):
        raise TrainerError(f"--shard {text!r} is not K/N with 1 <= K <= N (e.g. 2/4).")
    return int(match[1]), int(match[2])


def _grade_one(
    exercise: Exercise,
    path: Path,
    index: int,
    timeout: float,
    warm: CheckingService,
    feedback: str,
    flags: list[Flag],
) -> Grade:
    refusal = not_run(flags)
    if refusal:
        return error_grade(exercise, str(path), index, refusal, flags=flags)
    grade = _checked(exercise, path, index, timeout, warm, feedback)
    grade.flags = flags
    return grade


def _checked(
    exercise: Exercise,
    path: Path,
    index: int,
    timeout: float,
    warm: CheckingService,
    feedback: str,
) -> Grade:
    try:
        report = run_check(
            exercise,
            path,
            timeout=timeout,
            solution=solution_path(exercise),
            service=warm,
            feedback=feedback,
        )
    except TrainerError as error:
        return error_grade(exercise, str(path), index, error.message, _sha256(path))
    except OSError as error:
        return error_grade(exercise, str(path), index, f"cannot be read: {error.strerror}")
    return grade_of(exercise, str(path), index, report)


def _sha256(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return ""


UNPROTECTED = (
    "grade runs other people's code, and this machine cannot keep it from the rest of the "
    "machine: host protection is {summary}. Grade inside a container (see the README, "
    '"Host protection"), or pass --unprotected to grade here anyway.'
)


def protection_level(exercise: Exercise, service: CheckingService) -> ProtectionLevel | None:
    """The host protection a check gets on this machine: a learner process loads an empty file."""
    with tempfile.TemporaryDirectory(prefix="trainer-probe-") as folder:
        probe = Path(folder) / "probe.py"
        probe.write_text("# what protection does a check get here?\n", encoding="utf-8")
        return run_check(exercise, probe, service=service).protection


def grade(
    exercise: Exercise,
    submissions: Sequence[Submission],
    jobs: int | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    on_done: Callable[[Grade], None] | None = None,
    unprotected: bool = False,
    on_protection: Callable[[ProtectionLevel | None], None] | None = None,
    feedback: str = DEFAULT_FEEDBACK,
    shard: tuple[int, int] = (1, 1),
) -> Gradebook:
    """Check every submission of ``shard`` on every core; one hang or crash never stops
    the rest. Each report is kept at the ``feedback`` level. Each grade has its flags
    (:func:`class_flags`); a symlink or a file outside its folder is not run: 0 points.

    First the host protection a check gets here is found (``on_protection`` hears it):
    anything less than full refuses to grade, unless ``unprotected``.
    """
    workers = jobs or os.cpu_count() or 1
    share = shard_of(submissions, shard)
    flags = class_flags(exercise, submissions)
    # torch is imported once, by a warm process; each submission is a fork of it.
    with CheckingService() as warm, ThreadPoolExecutor(max_workers=workers) as pool:
        level = protection_level(exercise, warm)
        if on_protection is not None:
            on_protection(level)
        if not unprotected and (level is None or level.missing):
            summary = level.summary() if level is not None else "unknown"
            raise TrainerError(UNPROTECTED.format(summary=summary))
        futures = [
            pool.submit(
                _grade_one, exercise, item.path, index, timeout, warm, feedback, flags[index]
            )
            for index, item in share
        ]
        if on_done is not None:
            for future in futures:
                future.add_done_callback(lambda f: on_done(f.result()))
        grades = [f.result() for f in futures]
    return Gradebook(
        exercise=exercise.id,
        feedback=feedback,
        protection=level.to_dict() if level is not None else None,
        total=len(submissions),
        grades=grades,
        shard=shard,
    )
