"""Shared fixtures: every test gets its own workspace and working folder."""

from __future__ import annotations

import os

# rich sizes its consoles when trainer.console is imported: wide enough that
# the words a test looks for are not wrapped.
os.environ["COLUMNS"] = "200"

import json
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from trainer.catalog import Catalog
from trainer.checking.job import Job
from trainer.checking.runner import CheckingService, HostLimits, run_check
from trainer.cli import app

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def isolated_workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    workspace = tmp_path / "ws"
    monkeypatch.setenv("TRAINER_WORKSPACE", str(workspace))
    # A bug of ours writes its traceback here, never into the real temporary folder.
    monkeypatch.setenv("TRAINER_BUG_REPORTS", str(tmp_path / "bug-reports"))
    monkeypatch.chdir(tmp_path)
    return workspace


@dataclass
class CliResult:
    exit_code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


def run_cli(*args: str, input: str | None = None) -> CliResult:
    result = CliRunner().invoke(app, list(args), input=input, catch_exceptions=False)
    return CliResult(result.exit_code, result.stdout, result.stderr)


@pytest.fixture
def write_file(tmp_path: Path) -> Callable[[str, str], Path]:
    def write(name: str, source: str) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source), encoding="utf-8")
        return path

    return write


_SERVICE: list[CheckingService] = []


def shared_service() -> CheckingService:
    """One warm checking server per test process: the launch path of every check, cold
    or warm, is the same, so tests of the engine need not pay a torch import each."""
    if not _SERVICE:
        _SERVICE.append(CheckingService())
    return _SERVICE[0]


@pytest.fixture(scope="session", autouse=True)
def _close_shared_service() -> Iterator[None]:
    yield
    for service in _SERVICE:
        service.close()


class _Lent:
    """The shared warm server, lent to code that would start one of its own: its checks
    take the same launch path; it is left running when that code is done with it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._service = shared_service()

    def launch(self, job: Job) -> Any:
        return self._service.launch(job)

    def exit_code(self, pid: int, wait: float) -> int | None:
        return self._service.exit_code(pid, wait)

    def landed(self) -> None:
        self._service.landed()

    def died_since(self, generation: int, wait: float) -> bool:
        return self._service.died_since(generation, wait)

    @property
    def generation(self) -> int:
        return self._service.generation

    def close(self, wait: bool = True) -> None:
        return None

    def __enter__(self) -> _Lent:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


@pytest.fixture
def warm_commands(monkeypatch: pytest.MonkeyPatch) -> None:
    """Commands check on the shared warm server instead of starting a server each (a
    torch import, ~2 s of CPU): for tests of what a command says, records or draws, not
    of how a check starts. A server's own start, cold checks, timeouts and everything
    about processes keep their tests on servers of their own (test_commands, test_warm,
    test_startup, test_reliability, test_isolation, test_protection, ...)."""
    import trainer.authoring
    import trainer.checking.runner
    import trainer.grading

    monkeypatch.setattr(trainer.checking.runner, "CheckingService", _Lent)
    monkeypatch.setattr(trainer.authoring, "CheckingService", _Lent)
    monkeypatch.setattr(trainer.grading, "CheckingService", _Lent)


_OPTIONS = {
    "--timeout": ("timeout", float),
    "--memory-limit": ("memory_limit_mb", int),
    "--seed": ("seed", int),
}


def check_json(exercise_id: str, path: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    """What `trainer check EX --file PATH --json` reports, through the shared server:
    the exit code (0 pass, 1 fail) and the report. The CLI's own check is tested in
    tests/test_commands.py."""
    options: dict[str, Any] = {}
    flags = list(extra)
    while flags:
        flag = flags.pop(0)
        if flag == "--double-backward":
            options["double_backward"] = True
        elif flag == "--leave-out":  # a host protection, to prove the layers beneath it
            options["limits"] = HostLimits(skip=(flags.pop(0),))
        else:
            name, kind = _OPTIONS[flag]
            options[name] = kind(flags.pop(0))
    exercise = CATALOG.get(exercise_id)
    report = run_check(
        exercise,
        path,
        solution=CATALOG.solution_path(exercise),
        service=shared_service(),
        **options,
    )
    return (0 if report.passed else 1), report.to_dict()


def stage(report: dict[str, Any], stage_id: str) -> dict[str, Any]:
    found: dict[str, Any] = next(s for s in report["stages"] if s["id"] == stage_id)
    return found


def first_failure(report: dict[str, Any]) -> dict[str, Any] | None:
    return next((s for s in report["stages"] if s["verdict"] == "fail"), None)


CATALOG = Catalog([REPO])


@pytest.fixture(scope="session")
def repo_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package built as a wheel from this checkout, once per test process."""
    dist = tmp_path_factory.mktemp("dist")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TRAINER_WORKSPACE")}
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet",
         "-w", str(dist), str(REPO)],
        cwd=dist, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    (path,) = dist.glob("*.whl")
    return path


def bare_venv(folder: Path, python: str = sys.executable) -> Path:
    """A virtual environment without pip (seeding pip takes seconds): packages go in with
    this interpreter's pip, ``pip --python VENV/bin/python``."""
    made = subprocess.run(
        [python, "-m", "venv", "--without-pip", str(folder)], capture_output=True, text=True
    )
    assert made.returncode == 0, made.stderr
    return folder


def pip_into(venv: Path, *args: str | Path) -> list[str]:
    """The command that runs this interpreter's pip on ``venv``."""
    return [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), *map(str, args)]
