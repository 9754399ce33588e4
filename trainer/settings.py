"""Settings a workspace keeps for the commands run in it: the extra exercise folders.

``trainer --exercises-dir my-exercises start my_op`` remembers ``my-exercises``
here, so that the ``trainer check`` it suggests next finds ``my_op`` too. The
file is small JSON beside the progress file; one that cannot be read is
ignored with a notice, never a crash.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from trainer.files import write_atomically

SETTINGS_FILE = ".trainer-settings.json"
SETTINGS_VERSION = 1


@dataclass
class Settings:
    exercise_dirs: list[Path] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)  # what could not be used, and why


def load_settings(workspace: Path) -> Settings:
    path = workspace / SETTINGS_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return Settings()
    except (OSError, UnicodeDecodeError, ValueError) as error:
        return Settings(notices=[f"{path} cannot be read ({error}); it is ignored."])
    folders = data.get("exercise_dirs") if isinstance(data, dict) else None
    if not isinstance(folders, list) or not all(isinstance(f, str) for f in folders):
        return Settings(notices=[f"{path} is not a settings file of this trainer; it is ignored."])
    settings = Settings()
    for folder in map(Path, folders):
        if folder.is_dir():
            settings.exercise_dirs.append(folder)
        else:
            settings.notices.append(
                f"the exercise folder {folder}, remembered in {path}, is gone; it is skipped."
            )
    return settings


def remember_exercise_dirs(workspace: Path, folders: Sequence[Path]) -> bool:
    """Add ``folders`` (absolute) to the workspace's settings; True when the file changed."""
    path = workspace / SETTINGS_FILE
    kept = [str(f) for f in load_settings(workspace).exercise_dirs]
    added = [str(f.resolve()) for f in folders if str(f.resolve()) not in kept]
    added = list(dict.fromkeys(added))
    if not added:
        return False
    document = {"version": SETTINGS_VERSION, "exercise_dirs": kept + added}
    write_atomically(path, json.dumps(document, indent=2) + "\n")
    return True
