"""The command line in typer's own terms: lazy command modules, shared options, defaults."""

from __future__ import annotations

import ast
import fcntl
import importlib
import inspect
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import click
import pytest
import typer

from tests.conftest import REPO, run_cli
from trainer.checking.limits import DEFAULT_MEMORY_LIMIT_MB, DEFAULT_SEED, DEFAULT_TIMEOUT
from trainer.cli import COMMAND_MODULES
from trainer.interview import DEFAULT_MINUTES

COMMAND_FILES = sorted(set(COMMAND_MODULES.values()))
SOURCE = {"PYTHONPATH": str(REPO)}  # subprocesses import this checkout


def leaf_commands(command: click.Command, path: tuple[str, ...]) -> list[tuple[str, ...]]:
    """The command's path, or the paths of each subcommand of a group, at any depth."""
    if not isinstance(command, click.Group):
        return [path]
    return [
        leaf for name, sub in command.commands.items() for leaf in leaf_commands(sub, (*path, name))
    ]


def test_each_command_module_defines_exactly_its_own_command_or_group():
    for name, module_name in COMMAND_MODULES.items():
        module = importlib.import_module(module_name)
        built = typer.main.get_command(module.app)
        assert built.name == name, module_name
        if isinstance(built, click.Group):
            # A group (`classroom`): every subcommand is defined in that module.
            assert built.commands, module_name
            for sub in built.commands.values():
                assert not isinstance(sub, click.Group), (module_name, sub.name)
                assert sub.callback is not None, (module_name, sub.name)
                defined_in = inspect.unwrap(sub.callback).__module__
                assert defined_in == module_name, (module_name, sub.name, defined_in)


def test_the_table_lists_every_command_module():
    folder = REPO / "trainer" / "commands"
    modules = {f"trainer.commands.{p.stem}" for p in folder.glob("*.py")} - {
        "trainer.commands.__init__",
        "trainer.commands.common",
    }
    assert modules == set(COMMAND_MODULES.values())


def test_no_command_module_imports_the_root_so_there_is_no_import_cycle():
    for module_name in [*COMMAND_FILES, "trainer.commands.common"]:
        path = REPO / (module_name.replace(".", "/") + ".py")
        tree = ast.parse(path.read_text())
        imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)} | {
            a.name for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names
        }
        assert "trainer.cli" not in imported, module_name


PROBE = """
import json, sys
from trainer.cli import main
sys.argv = ["trainer", *json.loads(sys.argv[1])]
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted(m for m in sys.modules if m.startswith(("trainer.cli", "trainer.commands")))))
"""


@pytest.mark.parametrize(
    ("argv", "loaded"),
    [
        (
            ["hint", "sigmoid"],
            ["trainer.cli", "trainer.commands", "trainer.commands.common", "trainer.commands.hint"],
        ),
        (
            ["validate", "--help"],
            [
                "trainer.cli",
                "trainer.commands",
                "trainer.commands.common",
                "trainer.commands.validate",
            ],
        ),
        (
            ["classroom", "result", "sigmoid", "no-report.json"],
            [
                "trainer.cli",
                "trainer.commands",
                "trainer.commands.classroom",
                "trainer.commands.common",
            ],
        ),
    ],
)
def test_a_command_loads_only_the_module_that_defines_it(argv, loaded, tmp_path: Path):
    result = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(argv)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"TRAINER_WORKSPACE": str(tmp_path / "ws"), "PATH": "/usr/bin:/bin", **SOURCE},
        check=False,
    )
    assert json.loads(result.stdout.strip().splitlines()[-1]) == loaded


@pytest.mark.parametrize("command", list(COMMAND_MODULES))
def test_every_command_accepts_workspace_and_exercises_dir_after_its_name(command):
    from trainer.cli import command_of

    # Each subcommand of a group (`classroom init`, `classroom result`) takes them.
    paths = leaf_commands(command_of(COMMAND_MODULES[command]), (command,))
    assert paths
    for path in paths:
        result = run_cli(*path, "--help")
        assert result.exit_code == 0, path
        for option in ("--workspace", "-w", "--exercises-dir"):
            assert option in result.stdout, (path, option)


def test_the_root_accepts_the_same_two_options_before_the_command():
    result = run_cli("--help")
    assert "--workspace" in result.stdout and "--exercises-dir" in result.stdout


def test_the_workspace_given_before_or_after_the_command_is_the_same(tmp_path: Path):
    before, after = tmp_path / "before", tmp_path / "after"
    assert run_cli("-w", str(before), "start", "sigmoid").exit_code == 0
    assert run_cli("start", "relu", "-w", str(after)).exit_code == 0
    assert (before / "sigmoid.py").is_file() and (after / "relu.py").is_file()
    assert "Hint 1 of" in run_cli("-w", str(before), "hint").stdout
    assert "Hint 2 of" in run_cli("hint", "-w", str(before)).stdout


def test_an_option_after_the_command_wins_over_the_same_option_before_it(tmp_path: Path):
    first, second = tmp_path / "first", tmp_path / "second"
    assert run_cli("-w", str(first), "start", "sigmoid", "-w", str(second)).exit_code == 0
    assert (second / "sigmoid.py").is_file()
    assert not first.exists()


def test_exercises_dir_is_accepted_before_and_after_the_command(tmp_path: Path):
    root = tmp_path / "mine"
    assert run_cli("new", "triple", "--root", str(root)).exit_code == 0
    for number, argv in enumerate(
        (
            ["--exercises-dir", str(root), "hint", "triple"],
            ["hint", "triple", "--exercises-dir", str(root)],
        ),
        start=1,
    ):
        result = run_cli(*argv)
        assert result.exit_code == 0, result.stderr
        assert f"Hint {number} of" in result.stdout


@pytest.mark.parametrize(
    ("command", "default"),
    [
        (
            ["check"],
            f"--timeout  FLOAT RANGE [x>=1.0]  Seconds before the check is stopped. [default: {DEFAULT_TIMEOUT}]",
        ),
        (["check"], f"[default: {DEFAULT_SEED}]"),
        (["check"], f"[default: {DEFAULT_MEMORY_LIMIT_MB}]"),
        (["interview"], f"[default: {DEFAULT_MINUTES}]"),
        (["grade"], f"[default: {DEFAULT_TIMEOUT}]"),
    ],
)
def test_the_defaults_shown_in_help_are_the_core_s_own(command, default):
    result = run_cli(*command, "--help")
    flat = " ".join(result.stdout.replace("│", " ").split())
    assert " ".join(default.split()) in flat or default.split("[default")[-1] in flat


def test_dead_code_named_in_issue_11_is_gone():
    from trainer import interview, workspace
    from trainer.catalog import Catalog

    assert "created" not in workspace.StartResult.__dataclass_fields__
    assert not hasattr(Catalog, "root")
    assert interview.DEFAULT_MINUTES == 40.0  # now the one definition the CLI uses


def test_a_mistyped_command_is_suggested_once():
    result = run_cli("chek")
    assert result.exit_code == 2
    assert result.stderr.count("Did you mean 'check'?") == 1


def test_version_prints_the_package_version():
    import trainer

    result = run_cli("--version")
    assert result.exit_code == 0
    assert result.stdout.strip() == f"trainer {trainer.__version__}"


def test_output_whose_reader_stops_reading_ends_quietly_not_as_a_bug(tmp_path):
    """``trainer check --help | head -1``: the reader leaves while the command still
    writes. Exit 1 as click does, say nothing, write no bug report (the broken pipe
    reached the handler of our own bugs). The pipe holds 4 KiB of the 6 KiB, so the
    command is still writing when the reader goes. Remove the ``BrokenPipeError`` branch
    of ``LazyGroup.invoke`` and this test fails."""
    reader, writer = os.pipe()
    fcntl.fcntl(writer, 1031, 4096)  # F_SETPIPE_SZ
    env = {**os.environ, **SOURCE, "COLUMNS": "80", "TRAINER_BUG_REPORTS": str(tmp_path / "bugs")}
    command = subprocess.Popen(
        [sys.executable, "-m", "trainer", "check", "--help"],
        stdout=writer,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    os.close(writer)
    assert os.read(reader, 16)  # writing: the rest does not fit
    time.sleep(0.5)  # blocked on the full pipe
    os.close(reader)
    errors = command.communicate(timeout=60)[1]
    assert command.returncode == 1, errors
    assert errors == ""
    assert not (tmp_path / "bugs").exists()


def test_a_broken_pipe_that_is_not_the_output_is_a_bug_of_ours(monkeypatch, tmp_path):
    """A pipe to the checking server that breaks is not the reader of ``| head`` going
    away: a bug report and exit 3. Let ``_reader_gone`` say yes always and this fails."""
    from trainer import cli

    def breaks() -> None:
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setitem(cli.COMMAND_MODULES, "breaks", "")
    monkeypatch.setattr(cli, "command_of", lambda _: click.Command("breaks", callback=breaks))
    monkeypatch.setenv("TRAINER_BUG_REPORTS", str(tmp_path / "bugs"))
    result = run_cli("breaks")
    assert result.exit_code == 3, result.stderr
    assert len(list((tmp_path / "bugs").glob("bug-*.txt"))) == 1
