"""Commands that do not check code never import torch (a fact, not a timing)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SOURCE = {"PYTHONPATH": str(REPO)}  # the subprocesses import this checkout, not an installed one

PROBE = """
import contextlib, io, json, sys
from trainer.cli import main
argv, stdin = json.loads(sys.argv[1]), sys.argv[2]
sys.argv = ["trainer", *argv]
sys.stdin = io.StringIO(stdin)
code = 0
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main()
    except SystemExit as done:
        code = done.code or 0
print(json.dumps({"code": code, "torch": "torch" in sys.modules}))
"""


@pytest.mark.parametrize(
    ("argv", "stdin"),
    [
        (["--help"], ""),
        (["list"], ""),
        (["start", "sigmoid"], ""),
        (["hint", "sigmoid"], ""),
        (["hint", "linear", "--all"], ""),
        (["followup", "softmax"], ""),
        (["followup", "softmax", "--list"], ""),
        (["quiz", "clipped_relu"], "1\n" * 10),
        (["derive", "--help"], ""),
        (["derive", "--list"], ""),
        (["check", "--help"], ""),
        (["next"], ""),
        (["reset", "sigmoid"], ""),
        (["solution", "sigmoid", "--force"], ""),
        (["interview", "linear"], ""),
        (["watch", "--help"], ""),
        (["next", "--track", "losses"], ""),
        (["stats"], ""),
        (["plan"], ""),
        (["plan", "--days", "3", "--track", "losses"], ""),
        (["review"], ""),
        (["review", "--quiz"], ""),
        (["reset", "--all", "--yes"], ""),
        (["--version"], ""),
        (["validate", "--help"], ""),
        (["classroom", "init", "sigmoid", "relu"], ""),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else "",
)
def test_a_command_that_does_not_check_code_does_not_import_torch(argv, stdin, tmp_path: Path):
    env_workspace = tmp_path / "ws"
    result = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(argv), stdin],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"TRAINER_WORKSPACE": str(env_workspace), "PATH": "/usr/bin:/bin", **SOURCE},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    assert outcome == {"code": 0, "torch": False}


def test_the_check_command_imports_torch_only_in_its_child(tmp_path: Path):
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            PROBE,
            json.dumps(["check", "sigmoid", "--file", str(REPO / "solutions" / "sigmoid.py")]),
            "",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"TRAINER_WORKSPACE": str(tmp_path / "ws"), "PATH": "/usr/bin:/bin", **SOURCE},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == {"code": 0, "torch": False}


@pytest.mark.parametrize(
    ("argv", "code", "words"),
    [
        (["hint", "sigmoid"], 0, "Hint 1 of"),
        (["hint", "--help"], 0, "Usage: trainer hint"),
        (["--help"], 0, "Usage: trainer"),
        (["no-such-command"], 2, "No such command"),
        (["hint", "sigmoind"], 2, "Did you mean `sigmoid`?"),
    ],
)
def test_the_console_script_dispatches_like_the_app(argv, code, words, tmp_path: Path):
    result = subprocess.run(
        [sys.executable, "-m", "trainer", *argv],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={
            "TRAINER_WORKSPACE": str(tmp_path / "ws"),
            "PATH": "/usr/bin:/bin",
            "COLUMNS": "200",
            **SOURCE,
        },
        check=False,
    )
    assert result.returncode == code, result.stderr
    assert words in result.stdout + result.stderr


def test_merging_a_grades_shards_does_not_import_torch(tmp_path: Path):
    from trainer.gradebook import Gradebook, error_grade
    from trainer.spec import load_exercise

    exercise = load_exercise(REPO / "exercises" / "sigmoid.yaml")
    for k in (1, 2):
        grades = [error_grade(exercise, f"s{k - 1}.py", k - 1, "cannot be read")]
        book = Gradebook("sigmoid", "full", None, 2, grades, shard=(k, 2))
        (tmp_path / f"shard-{k}.json").write_text(json.dumps(book.to_dict()))
    argv = ["grade-merge", "shard-1.json", "shard-2.json", "--csv", "grades.csv"]
    result = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(argv), ""],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"TRAINER_WORKSPACE": str(tmp_path / "ws"), "PATH": "/usr/bin:/bin", **SOURCE},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == {"code": 0, "torch": False}
    assert (tmp_path / "grades.csv").read_text().count("cannot be read") == 2


# -- the checking server starts first for a command that checks code ----------------------


@pytest.mark.parametrize(
    ("argv", "starts"),
    [
        (["check"], True),
        (["check", "sigmoid", "--file", "x.py"], True),
        (["watch", "relu"], True),
        (["grade", "class"], True),
        (["check", "--help"], False),
        (["hint", "sigmoid"], False),
        (["list"], False),
        ([], False),
    ],
)
def test_only_a_command_that_checks_code_starts_the_server_first(argv, starts):
    from trainer.launch import starts_a_server

    assert starts_a_server(argv) is starts


def test_the_first_checking_service_takes_the_server_started_early():
    """One server, not two: the command's service is the process start_early began."""
    from trainer.checking import spawn
    from trainer.checking.runner import CheckingService

    spawn.start_early()
    (early,) = spawn._EARLY
    with CheckingService() as service:
        assert service._process is early.process
        assert spawn.take_early() is None
    assert early.process.poll() is not None  # closing the service ended it


def test_a_server_started_early_that_nothing_took_ends_with_the_command(tmp_path: Path):
    script = (
        "from trainer.checking import spawn\n"
        "spawn.start_early()\n"
        "print(spawn._EARLY[0].process.pid, flush=True)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=SOURCE, check=True
    )
    pid = int(result.stdout.strip())
    with pytest.raises(ProcessLookupError):
        import os

        os.kill(pid, 0)


def test_a_single_check_returns_before_its_server_has_ended_and_the_process_reaps_it(
    tmp_path: Path,
):
    """The server frees torch's memory while the report is drawn, and the command waits
    for it before it exits: so the command's own resource usage covers its server (the
    benchmark's peak memory reads it), and no server outlives it."""
    import os

    script = (
        "import sys\n"
        "from trainer.catalog import Catalog, solution_path\n"
        "from trainer.checking import runner\n"
        "exercise = Catalog.default().get('relu')\n"
        "report = runner.run_check(exercise, solution_path(exercise))\n"
        "print(report.passed, len(runner._ENDING), flush=True)\n"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=SOURCE
    )
    assert process.stdout is not None
    with process.stdout:
        passed, ending = process.stdout.read().split()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    assert process.returncode == 0 and passed == "True"
    assert int(ending) <= 1
    assert usage.ru_maxrss > 150 * 1024  # KiB: the server's torch, not the CLI's own ~40 MB


def test_the_console_script_starts_the_server_before_the_command_line_runs(monkeypatch):
    """By the time the CLI's own code runs, the server of a checking command has been
    started (torch imports meanwhile); a command that checks nothing starts none."""
    import trainer.cli
    from trainer import launch
    from trainer.checking import spawn

    seen: list[bool] = []
    monkeypatch.setattr(trainer.cli, "main", lambda: seen.append(bool(spawn._EARLY)))
    for argv, started in ((["trainer", "hint", "relu"], False), (["trainer", "check"], True)):
        monkeypatch.setattr(sys, "argv", argv)
        launch.main()
        assert seen.pop() is started
        spawn._stop_untaken()


def test_what_the_cli_does_while_the_server_gets_ready_runs_before_it_waits(monkeypatch):
    """The console script has the CLI prepare its drawing (rich) while the server imports
    torch: the work given to start_early runs once, by the first service, before that
    service waits for the server. Remove the ``meanwhile()`` call in
    ``CheckingService._start`` and this test fails."""
    from trainer.checking import spawn
    from trainer.checking.runner import CheckingService

    done: list[bool] = []
    spawn.start_early(meanwhile=lambda: done.append(spawn._EARLY == []))
    with CheckingService():
        assert done == [True]  # once, with the early server already taken
    with CheckingService():
        assert done == [True]  # not again


@pytest.mark.parametrize(
    ("code", "expected"), [(None, 0), (0, 0), (1, 1), (2, 2), (130, 130), ("stopped", 1)]
)
def test_the_console_script_ends_with_the_exit_code_python_would_give(code, expected, capsys):
    from trainer.launch import _exit_code

    assert _exit_code(code) == expected
    assert capsys.readouterr().err == ("stopped\n" if isinstance(code, str) else "")


def test_the_console_script_flushes_what_it_printed_and_runs_atexit_before_it_ends(tmp_path):
    """It ends with os._exit (no interpreter teardown): buffered output and atexit's work
    (the checking server waited for) must not be lost on the way."""
    script = (
        "import atexit, sys\n"
        "import trainer.launch as launch\n"
        "atexit.register(lambda: print('atexit ran', file=sys.stderr, flush=True))\n"
        "launch.main = lambda: (print('buffered', end=''), sys.exit(3))\n"
        "launch.run()\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=SOURCE, check=False
    )
    assert result.returncode == 3
    assert result.stdout == "buffered"
    assert result.stderr == "atexit ran\n"
