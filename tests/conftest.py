"""Shared fixtures: every test gets its own workspace and working folder."""

from __future__ import annotations

import os

# rich sizes its consoles when trainer.console is imported: wide enough that
# the words a test looks for are not wrapped.
os.environ["COLUMNS"] = "200"

import json
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from trainer.catalog import Catalog
from trainer.cli import app

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def isolated_workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    workspace = tmp_path / "ws"
    monkeypatch.setenv("TRAINER_WORKSPACE", str(workspace))
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


def check_json(exercise_id: str, path: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    """Run `trainer check --json` on a file; return the exit code and the report."""
    result = run_cli("check", exercise_id, "--file", str(path), "--json", *extra)
    return result.exit_code, json.loads(result.stdout)


def stage(report: dict[str, Any], stage_id: str) -> dict[str, Any]:
    found: dict[str, Any] = next(s for s in report["stages"] if s["id"] == stage_id)
    return found


def first_failure(report: dict[str, Any]) -> dict[str, Any] | None:
    return next((s for s in report["stages"] if s["verdict"] == "fail"), None)


CATALOG = Catalog([REPO])
