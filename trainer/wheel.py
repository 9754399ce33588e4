"""The running trainer as a wheel file, for places with no package index entry for it.

``autograd-trainer`` is not on PyPI. A Classroom assignment (``classroom init``)
carries the wheel in its repository and its workflow installs that file; a
notebook installs the wheel beside it (``trainer wheel``). The wheel is written
from the files the running trainer is made of, with the standard library: an
installed wheel's package (which holds the catalogue in ``trainer/_catalog``),
or a checkout's package with the catalogue added as the build does
(pyproject.toml's force-include). Its metadata is the installed distribution's.
The same files give the same bytes: each entry has a fixed date.
"""

from __future__ import annotations

import base64
import hashlib
import zipfile
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

from trainer.catalog import catalog_root
from trainer.errors import TrainerError

DISTRIBUTION = "autograd-trainer"
CATALOG_FOLDERS = ("exercises", "solutions", "quizzes")
_PACKAGE = Path(__file__).resolve().parent
_DATE = (1980, 1, 1, 0, 0, 0)  # the earliest a zip can say: the same bytes every time
_SKIPPED = {"__pycache__"}


def wheel_name() -> str:
    version = _distribution().version
    return f"{DISTRIBUTION.replace('-', '_')}-{version}-py3-none-any.whl"


def _distribution() -> metadata.Distribution:
    try:
        return metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        raise TrainerError(
            f"the running trainer is not installed as a package ({DISTRIBUTION}), so there "
            "is no metadata to put in a wheel: install it (pip install -e . in a checkout)."
        ) from None


def _package_files() -> Iterator[tuple[str, Path]]:
    """(name in the wheel, file) for each file of the package and its catalogue."""
    for path in sorted(_PACKAGE.rglob("*")):
        relative = path.relative_to(_PACKAGE)
        if path.is_file() and not _SKIPPED & set(relative.parts) and path.suffix != ".pyc":
            yield f"trainer/{relative.as_posix()}", path
    if catalog_root() != _PACKAGE / "_catalog":  # a checkout: the build adds the catalogue
        for folder in CATALOG_FOLDERS:
            top = catalog_root() / folder
            for path in sorted(top.rglob("*")):
                relative = path.relative_to(top)
                if path.is_file() and not _SKIPPED & set(relative.parts):
                    yield f"trainer/_catalog/{folder}/{relative.as_posix()}", path


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def write_wheel(folder: Path) -> Path:
    """Write the running trainer's wheel into ``folder``; returns its path."""
    distribution = _distribution()
    info = f"{DISTRIBUTION.replace('-', '_')}-{distribution.version}.dist-info"
    entries: list[tuple[str, bytes]] = [
        (name, path.read_bytes()) for name, path in _package_files()
    ]
    for name in ("METADATA", "entry_points.txt"):
        text = distribution.read_text(name)
        if text is not None:
            entries.append((f"{info}/{name}", text.encode("utf-8")))
    wheel = "Wheel-Version: 1.0\nGenerator: trainer\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    entries.append((f"{info}/WHEEL", wheel.encode()))
    record = [_record_line(name, data) for name, data in entries] + [f"{info}/RECORD,,"]
    entries.append((f"{info}/RECORD", ("\n".join(record) + "\n").encode()))
    target = folder / wheel_name()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f".{target.name}.partial")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
            for name, data in entries:
                entry = zipfile.ZipInfo(name, date_time=_DATE)
                entry.compress_type = zipfile.ZIP_DEFLATED
                entry.external_attr = 0o644 << 16
                archive.writestr(entry, data)
        partial.replace(target)
    except OSError as error:
        raise TrainerError(f"cannot write {target}: {error.strerror}.") from None
    return target
