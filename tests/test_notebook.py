"""The trainer in Jupyter: the magics' parsing and behaviour in-process, then the example
notebook executed headless by a real ipykernel, and the kernel's checking server ending
with the kernel, whether it shuts down, is killed or is interrupted mid-check."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

# Jupyter's own paths: platformdirs now, not the deprecated ones (which warn).
os.environ.setdefault("JUPYTER_PLATFORM_DIRS", "1")

from IPython.core.error import StdinNotImplementedError, UsageError

import trainer
from tests.conftest import REPO, bare_venv, pip_into
from trainer.api import Report, close_service
from trainer.checking.processes import children_of
from trainer.notebook import Command, MagicUsageError, TrainerMagics, parse
from trainer.notebook_view import Shown
from trainer.state import StateStore

NOTEBOOK = REPO / "examples" / "quickstart.ipynb"
SOLUTION = REPO / "solutions" / "sigmoid.py"
KERNEL = "trainer-test-kernel"


# Parsing ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "cell", "expected"),
    [
        ("list", False, Command("list")),
        ("start sigmoid", False, Command("start", "sigmoid")),
        (
            "start relu --force -w ws",
            False,
            Command("start", "relu", force=True, workspace=Path("ws")),
        ),
        ("hint", False, Command("hint")),
        ("hint linear --all", False, Command("hint", "linear", show_all=True)),
        ("quiz sigmoid", False, Command("quiz", "sigmoid")),
        ("solution sigmoid --force", False, Command("solution", "sigmoid", force=True)),
        (
            "check sigmoid --file 'my file.py'",
            False,
            Command("check", "sigmoid", file=Path("my file.py")),
        ),
        (
            "check sigmoid --seed 3 --timeout 5 --double-backward",
            False,
            Command("check", "sigmoid", seed=3, timeout=5.0, double_backward=True),
        ),
        ("check sigmoid", True, Command("check", "sigmoid")),
        ("check sigmoid --define", True, Command("check", "sigmoid", define=True)),
        ("check", True, Command("check")),
    ],
)
def test_a_magic_line_parses_into_the_command_and_options_it_names(line, cell, expected):
    assert parse(line, cell=cell) == expected


@pytest.mark.parametrize(
    ("line", "cell", "words"),
    [
        ("hint sigmoid", True, "only `%%trainer check` takes a cell"),
        ("check sigmoid --define", False, "use it as `%%trainer check EX --define`"),
        ("check sigmoid --file x.py", True, "--file is for the line magic"),
        ("chek sigmoid", False, "invalid choice: 'chek'"),
        ("start", False, "the following arguments are required: EX"),
        ("hint sigmoid --every", False, "unrecognized arguments: --every"),
        ("check --timeout 0", False, "--timeout must be at least 1 second"),
        ("check --seed three", False, "invalid int value: 'three'"),
        ("start 'sigmoid", False, "No closing quotation"),
    ],
)
def test_a_wrong_magic_line_is_refused_with_what_is_wrong_and_where_help_is(line, cell, words):
    with pytest.raises(MagicUsageError) as raised:
        parse(line, cell=cell)
    assert words in raised.value.message


# The magics in-process, on a stand-in for IPython's shell -------------------------------


class FakeShell:
    def __init__(self) -> None:
        self.user_ns: dict[str, Any] = {}
        self.next_inputs: list[str] = []

    def set_next_input(self, s: str, replace: bool = False) -> None:
        self.next_inputs.append(s)


class Answers:
    """input() for the quiz: the given answers, then no more input (as headless)."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.prompts: list[str] = []

    def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        if not self.answers:
            raise StdinNotImplementedError("raw_input was called, but this frontend does not")
        return self.answers.pop(0)


@pytest.fixture
def magics() -> tuple[TrainerMagics, FakeShell, list[object]]:
    shell = FakeShell()
    shown: list[object] = []
    return TrainerMagics(shell, display=shown.append, ask=Answers()), shell, shown


def _text(shown: list[object]) -> str:
    return "\n".join(repr(item) if isinstance(item, Shown) else str(item) for item in shown)


def test_start_writes_the_scratch_file_and_fills_the_next_cell_with_the_checked_stub(
    magics, isolated_workspace
):
    magic, shell, shown = magics
    assert magic.trainer("start sigmoid") is None
    scratch = isolated_workspace / "sigmoid.py"
    stub = scratch.read_text(encoding="utf-8")
    assert shell.next_inputs == [f"%%trainer check sigmoid\n{stub}"]
    text = _text(shown)
    assert "Sigmoid with a hand-written backward" in text
    assert (
        "If no new cell appeared below, copy this into one" in text
    )  # where cells cannot be added
    assert f"%%trainer check sigmoid\n{stub.splitlines()[0]}" in text
    html = "".join(s.html or "" for s in shown if isinstance(s, Shown))
    assert "<details>" in html and "%%trainer check sigmoid" in html
    assert StateStore(isolated_workspace).load().current == "sigmoid"


def test_start_after_edits_keeps_them_and_offers_them_in_the_next_cell(magics, isolated_workspace):
    magic, shell, shown = magics
    magic.trainer("start sigmoid")
    scratch = isolated_workspace / "sigmoid.py"
    scratch.write_text("# my edits\n", encoding="utf-8")
    magic.trainer("start sigmoid")
    assert shell.next_inputs[-1] == "%%trainer check sigmoid\n# my edits\n"
    assert "already has your edits" in _text(shown)


def test_hint_reveals_one_hint_at_a_time_in_notebook_terms(magics):
    magic, _, shown = magics
    magic.trainer("hint sigmoid")
    magic.trainer("hint sigmoid")
    text = _text(shown)
    assert "**Hint 1 of 3**" in text and "**Hint 2 of 3**" in text
    assert "`%trainer hint sigmoid` again for hint 3" in text


def test_the_quiz_asks_with_input_and_keeps_the_best_score(isolated_workspace):
    answers = Answers("9", "4", "1", "2")  # 9 is not a choice: asked again
    shown: list[object] = []
    magic = TrainerMagics(FakeShell(), display=shown.append, ask=answers)
    magic.trainer("quiz sigmoid")
    text = _text(shown)
    assert "Please type a number from 1 to 4." in text
    assert "**Score: 2 of 3.**" in text
    assert len(answers.prompts) == 4
    assert StateStore(isolated_workspace).load().progress("sigmoid").quiz_best == 2


def test_the_quiz_without_input_shows_the_questions_and_saves_nothing(magics, isolated_workspace):
    magic, _, shown = magics
    magic.trainer("quiz sigmoid")
    text = _text(shown)
    assert "Question 1 of 3" in text and "Question 3 of 3" in text
    assert "cannot ask for answers here" in text
    assert not (isolated_workspace / "progress.json").exists()


def test_the_solution_before_a_pass_without_input_is_refused_with_the_force_advice(magics):
    magic, _, shown = magics
    with pytest.raises(UsageError, match=r"see it anyway with `%trainer solution sigmoid --force`"):
        magic.trainer("solution sigmoid")
    magic.trainer("solution sigmoid --force")
    assert "Reference solution: sigmoid (not passed yet)" in _text(shown)


def test_an_unknown_exercise_is_a_usage_error_with_a_suggestion(magics):
    magic, _, _ = magics
    with pytest.raises(UsageError, match="Did you mean `sigmoid`"):
        magic.trainer("start sigmoind")


def test_an_empty_line_prints_the_usage(magics, capsys):
    magic, _, _ = magics
    assert magic.trainer("") is None
    assert "usage: %trainer" in capsys.readouterr().out


def test_list_shows_every_exercise_in_a_table(magics):
    magic, _, shown = magics
    magic.trainer("list")
    html = "".join(s.html or "" for s in shown if isinstance(s, Shown))
    assert "<table" in html and "sigmoid" in html and "relu" in html
    assert "Begin with `%trainer start" in _text(shown)


RIGHT_CELL = SOLUTION.read_text(encoding="utf-8")
WRONG_CELL = (REPO / "solutions" / "wrong" / "sigmoid" / "forgets_grad_output.py").read_text(
    encoding="utf-8"
)


@pytest.fixture
def warm_server(warm_commands: None) -> Iterator[None]:
    """The magics' server for the process is the worker's shared one (the magics' own
    start is in the kernel tests below); it is let go after the test."""
    yield
    close_service()


def test_a_checked_cell_becomes_the_scratch_file_and_the_previous_version_is_backed_up(
    magics, isolated_workspace, warm_server
):
    magic, _, shown = magics
    wrong = magic.run(parse("check sigmoid", cell=True), WRONG_CELL)
    assert wrong is not None and wrong.passed is False
    assert shown[-2] is wrong  # the report, then the picture of the wrong gradient
    assert "Slope of your gradient for `x`" in repr(shown[-1])
    scratch = isolated_workspace / "sigmoid.py"
    assert scratch.read_text(encoding="utf-8") == WRONG_CELL
    again = magic.run(parse("check sigmoid", cell=True), WRONG_CELL)  # the same: no new backup
    assert again is not None and again.warm
    backups = isolated_workspace / ".backups"
    assert not backups.exists()
    right = magic.run(parse("check sigmoid", cell=True), RIGHT_CELL)
    assert right is not None and right.passed is True
    assert scratch.read_text(encoding="utf-8") == RIGHT_CELL
    [backup] = backups.iterdir()
    assert backup.read_text(encoding="utf-8") == WRONG_CELL
    assert "Your previous version was saved to" in _text(shown)
    assert not [p for p in isolated_workspace.iterdir() if p.name.startswith(".sigmoid.py-")]


def test_define_runs_the_cell_in_the_kernel_after_the_verdict_and_check_finds_its_class(
    magics, warm_server
):
    from trainer import check

    magic, shell, shown = magics
    assert magic.trainer("check sigmoid --define", RIGHT_CELL) is None  # shown, not returned
    [report] = [s for s in shown if isinstance(s, Report)]
    assert report.passed
    cls = shell.user_ns["MySigmoid"]
    assert check("sigmoid", cls).passed  # its source: the cell that defined it


# A real kernel ------------------------------------------------------------------------------


@pytest.fixture
def kernel_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A kernelspec for this interpreter in a temporary folder, found by name; IPython's and
    Jupyter's own files there too, never in the home folder."""
    spec = tmp_path / "jupyter" / "kernels" / KERNEL
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "trainer tests",
                "language": "python",
            }
        )
    )
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(tmp_path / "jupyter-config"))
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    # The kernel imports the trainer these tests import, whatever is installed.
    root = str(Path(trainer.__file__).resolve().parent.parent)
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
    )
    return KERNEL


def _descendants(pid: int) -> set[int]:
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children_of(todo.pop()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _left_running(pids: set[int], seconds: float = 15.0) -> set[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        left = {pid for pid in pids if _running(pid)}
        if not left:
            return left
        time.sleep(0.1)
    return {pid for pid in pids if _running(pid)}


def _outputs(cell: Any) -> tuple[str, str]:
    """A code cell's plain text and HTML, every output joined."""
    texts, htmls = [], []
    for output in cell.outputs:
        assert output.output_type != "error", "\n".join(output.traceback)
        if output.output_type == "stream":
            texts.append(output.text)
        else:
            texts.append(output.data.get("text/plain", ""))
            htmls.append(output.data.get("text/html", ""))
    return "\n".join(texts), "\n".join(htmls)


def _kernel_pid(manager: Any) -> int:
    pid = getattr(manager.provisioner, "pid", None)
    assert isinstance(pid, int), "the kernel runs locally, with a pid"
    return pid


def test_the_quickstart_notebook_runs_headless_fails_the_wrong_cell_passes_the_right_one_warm(
    kernel_env, tmp_path, isolated_workspace
):
    import nbformat
    from nbclient import NotebookClient

    read: Callable[..., Any] = nbformat.read  # not annotated
    notebook = read(NOTEBOOK, as_version=4)
    client = NotebookClient(
        notebook,
        kernel_name=kernel_env,
        timeout=180,
        resources={"metadata": {"path": str(tmp_path)}},
    )
    with client.setup_kernel():
        for index, cell in enumerate(notebook.cells):
            client.execute_cell(cell, index)
        kernel = _kernel_pid(client.km)
        server = _descendants(kernel)
    cells = {cell["id"]: cell for cell in notebook.cells}

    wrong_text, wrong_html = _outputs(cells["wrong-check"])
    assert "✘ fail  Backward parity" in wrong_text
    assert "does not multiply by grad_output" in " ".join(wrong_text.split())  # wrapped
    assert "✘ fail" in wrong_html and "does not multiply by grad_output" in wrong_html
    assert "Fix the cell and run it again" in wrong_text
    assert "Slope of your gradient for `x`" in wrong_text  # the picture, after the report

    right_text, right_html = _outputs(cells["right-check"])
    assert re.search(r"All \d+ stages passed", right_text) and "✔ pass" in right_html
    seconds = re.search(
        r"stages passed \(1 skipped\) in ([\d.]+) s \((warm checker|cold start)\)", right_text
    )
    assert seconds is not None, right_text
    assert seconds.group(2) == "warm checker"  # the kernel's server took the second check
    assert float(seconds.group(1)) < 5.0  # ~0.3 s on an idle machine; generous for CI

    assert "tensor([0.0452, 0.1491, 0.2500, 0.1491, 0.0452])" in _outputs(cells["use"])[0]
    assert _outputs(cells["api"])[0] == "(True, True)"
    quiz_text, _ = _outputs(cells["quiz"])
    assert "Question 1 of 3" in quiz_text and "cannot ask for answers here" in quiz_text

    scratch = isolated_workspace / "sigmoid.py"
    right_source = cells["right-check"].source.split("\n", 1)[1]
    assert scratch.read_text(encoding="utf-8") == right_source + "\n"
    [backup] = (isolated_workspace / ".backups").iterdir()
    assert "return output * (1 - output)" in backup.read_text(encoding="utf-8")
    progress = StateStore(isolated_workspace).load().progress("sigmoid")
    assert progress.passed and progress.hints_shown == 1

    assert len(server) >= 2, "the checking server and its learner zygote ran under the kernel"
    assert not _left_running(server), "a process of the checking server outlived the kernel"


def _start_kernel(kernel_name: str, cwd: Path) -> tuple[Any, Any]:
    from jupyter_client.manager import start_new_kernel

    return start_new_kernel(kernel_name=kernel_name, cwd=str(cwd), startup_timeout=120)


def _run(client: Any, code: str, timeout: float = 180) -> tuple[dict[str, Any], str]:
    texts: list[str] = []

    def collect(message: dict[str, Any]) -> None:
        content = message["content"]
        if message["msg_type"] == "stream":
            texts.append(content["text"])
        elif message["msg_type"] in ("execute_result", "display_data"):
            texts.append(content["data"].get("text/plain", ""))
        elif message["msg_type"] == "error":
            texts.append(f"{content['ename']}: {content['evalue']}")

    reply = client.execute_interactive(code, timeout=timeout, output_hook=collect)
    return reply["content"], "\n".join(texts)


def test_a_killed_kernel_leaves_no_process_of_its_checking_server(kernel_env, tmp_path):
    manager, client = _start_kernel(kernel_env, tmp_path)
    try:
        reply, text = _run(
            client, f"from trainer import check\nprint(check('sigmoid', {str(SOLUTION)!r}).passed)"
        )
        assert reply["status"] == "ok" and text.strip() == "True", text
        server = _descendants(_kernel_pid(manager))
        assert len(server) >= 2
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)  # SIGKILL: no atexit, no cleanup of ours
    assert not _left_running(server), "the checking server outlived a killed kernel"


HANGS = RIGHT_CELL.replace(
    "(output,) = ctx.saved_tensors",
    "(output,) = ctx.saved_tensors\n        import time\n        time.sleep(3600)",
)


def test_an_interrupt_during_a_check_leaves_the_cell_saved_whole_and_nothing_running(
    kernel_env, tmp_path, isolated_workspace
):
    manager, client = _start_kernel(kernel_env, tmp_path)
    try:
        reply, _ = _run(client, "%load_ext trainer")
        assert reply["status"] == "ok"
        client.execute(f"%%trainer check sigmoid --timeout 120\n{HANGS}")
        scratch = isolated_workspace / "sigmoid.py"
        deadline = time.monotonic() + 120
        kernel = _kernel_pid(manager)
        learner_running = False
        while time.monotonic() < deadline and not learner_running:
            time.sleep(0.2)  # until the checking server, its zygote, a checker and a learner run
            learner_running = len(_descendants(kernel)) >= 4
        assert learner_running, "the check did not start"
        time.sleep(0.5)
        under_way = _descendants(kernel)
        manager.interrupt_kernel()
        reply = client.get_shell_msg(timeout=60)["content"]
        assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt"

        assert scratch.read_text(encoding="utf-8") == HANGS
        assert not [p for p in isolated_workspace.iterdir() if p.name.startswith(".sigmoid")]
        assert not _left_running(under_way), "a process of the interrupted check is left"

        reply, text = _run(client, f"%%trainer check sigmoid\n{RIGHT_CELL}")
        if reply["status"] == "aborted":  # the kernel may still drop a request sent as it recovers
            reply, text = _run(client, f"%%trainer check sigmoid\n{RIGHT_CELL}")
        assert reply["status"] == "ok"
        assert re.search(r"All \d+ stages passed", text) and "cold start" in text  # a fresh server
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


# Colab and other environments that have torch already -------------------------------------


@pytest.mark.slow
def test_installing_the_wheel_where_torch_is_installed_keeps_that_torch(tmp_path, repo_wheel):
    """As on Colab: pip resolves the package's dependencies against the torch already
    there and installs nothing but the trainer (the wheel is pure Python; torch a range)."""
    import sysconfig

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIP_INDEX_URL")}

    def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(a) for a in args], cwd=tmp_path, env=env, capture_output=True, text=True
        )

    wheel = repo_wheel
    assert wheel.name.endswith("-py3-none-any.whl")  # no compiled parts, no platform tag
    # Without pip, nor the old setuptools Python < 3.12 seeds, which would shadow torch's.
    venv = bare_venv(tmp_path / "venv")
    python = venv / "bin" / "python"
    # This environment's packages (torch among them) as the venv's own, like Colab's.
    site = run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    Path(site.stdout.strip(), "existing.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    report = tmp_path / "report.json"
    # No index: had pip wanted another torch (or anything else), it could not find it.
    planned = run(
        *pip_into(venv, "install", "--dry-run", "--no-index", "--quiet", "--report", report, wheel)
    )
    assert planned.returncode == 0, planned.stdout + planned.stderr
    installs = [item["metadata"]["name"] for item in json.loads(report.read_text())["install"]]
    assert installs == ["autograd-trainer"]


def test_a_figure_of_a_picture_is_shown_as_a_png_whatever_the_plotting_backend():
    from trainer.notebook_view import FigureView

    class Figure:
        def savefig(self, buffer: Any, format: str, dpi: int) -> None:
            buffer.write(b"\x89PNG" + format.encode())

    view = FigureView(Figure(), "the text form")
    assert view._repr_png_() == b"\x89PNGpng"
    assert repr(view) == "the text form"
