"""``from trainer import check``: its input forms, its report, and verdicts equal to the CLI's."""

from __future__ import annotations

import importlib.util
import json
import linecache
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import REPO, check_json
from trainer.api import close_service, interrupts_held
from trainer.class_source import source_of_class
from trainer.errors import TrainerError, WorkspaceError

SOLUTION = REPO / "solutions" / "sigmoid.py"
WRONG = REPO / "solutions" / "wrong" / "sigmoid"
FORGETS = WRONG / "forgets_grad_output.py"


# The API keeps one checking server per process: here the worker's shared one, lent (the
# API's own start, in a real kernel, is tested in tests/test_notebook.py).
pytestmark = pytest.mark.usefixtures("warm_commands")


@pytest.fixture(scope="module", autouse=True)
def _one_server_for_the_module() -> Iterator[None]:
    """The API's hold on its server ends with this module's tests."""
    yield
    close_service()


def _import(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _verdicts(stages: list[dict[str, str]]) -> dict[str, str]:
    return {s["id"]: s["verdict"] for s in stages}


# Import --------------------------------------------------------------------------------


def test_importing_trainer_imports_neither_the_api_nor_torch_nor_ipython():
    probe = (
        "import sys, trainer, json; print(json.dumps(sorted(m for m in "
        "('torch', 'IPython', 'trainer.api', 'trainer.notebook', 'rich') if m in sys.modules)))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    )
    assert json.loads(result.stdout) == []


def test_check_is_an_attribute_of_the_package_loaded_on_first_use():
    import trainer
    from trainer import check
    from trainer.api import check as api_check

    assert check is api_check
    with pytest.raises(AttributeError, match="no attribute 'chek'"):
        trainer.chek  # noqa: B018 - the attribute access is the test


# Input forms ---------------------------------------------------------------------------


def test_a_path_to_a_correct_solution_passes_and_the_report_reads_as_text():
    from trainer import check

    report = check("sigmoid", SOLUTION)
    assert report.passed is True
    assert report.diagnosis is None and report.failure is None
    assert [s.id for s in report.stages][:4] == ["load", "forward", "backward", "contract"]
    text = str(report)
    assert "✔ pass  Backward parity" in text
    assert re.search(r"All \d+ stages passed", text)
    assert repr(report).startswith("<Report sigmoid: passed")


def test_a_source_string_that_forgets_grad_output_fails_with_the_diagnosis():
    from trainer import check

    report = check("sigmoid", FORGETS.read_text(encoding="utf-8"))
    assert report.passed is False
    diagnosis = report.diagnosis
    assert diagnosis is not None
    assert diagnosis.stage == "Backward parity"
    assert "does not multiply by grad_output" in diagnosis.message
    assert diagnosis.mistake is not None and diagnosis.input == "x"
    assert "does not multiply by grad_output" in str(diagnosis)
    assert "✘ fail  Backward parity" in str(report)


def test_a_path_given_as_a_string_is_checked_like_a_path(tmp_path):
    from trainer import check

    assert check("sigmoid", str(SOLUTION)).passed


def test_the_second_check_of_a_process_is_taken_by_the_warm_server():
    from trainer import check

    check("sigmoid", SOLUTION)
    again = check("sigmoid", SOLUTION)
    assert again.warm is True
    assert again.to_dict()["warm"] is True
    assert again.seconds < 5.0  # ~0.2 s on an idle machine; generous for a busy one


def test_a_class_from_a_file_is_checked_with_its_modules_imports():
    from trainer import check

    right = _import(SOLUTION, "right_sigmoid")
    wrong = _import(FORGETS, "wrong_sigmoid")
    assert check("sigmoid", right.MySigmoid).passed is True
    failed = check("sigmoid", wrong.MySigmoid)
    assert failed.passed is False
    assert failed.failure is not None and failed.failure.id == "backward"


def test_the_source_of_a_class_keeps_its_imports_and_its_line_numbers(tmp_path):
    module_file = tmp_path / "my_module.py"
    module_file.write_text(
        "import math\n"
        "from trainer import check\n"
        "import trainer.api\n"
        "\n"
        "\n"
        "class MySigmoid:\n"
        "    @staticmethod\n"
        "    def forward(ctx, x):\n"
        "        return math.e\n",
        encoding="utf-8",
    )
    module = _import(module_file, "my_module")
    name, source = source_of_class(module.MySigmoid, "sigmoid")
    assert name == "my_module.py"
    lines = source.splitlines()
    assert lines[0] == "import math; import torch"  # the trainer's own imports are left out
    assert lines[5] == "class MySigmoid:"  # line 6, as in the file


def test_a_class_defined_in_a_cell_kept_by_linecache_is_found_there():
    cell = (
        "import math\n"
        "\n"
        "class MySigmoid:\n"
        "    @staticmethod\n"
        "    def backward(ctx, grad_output):\n"
        "        return grad_output\n"
    )
    filename = "<cell-for-a-test>"
    linecache.cache[filename] = (len(cell), None, cell.splitlines(True), filename)
    namespace: dict[str, object] = {}
    try:
        exec(compile(cell, filename, "exec"), namespace)
        cls = namespace["MySigmoid"]
        assert isinstance(cls, type)
        name, source = source_of_class(cls, "sigmoid")
    finally:
        del linecache.cache[filename]
    assert name == "sigmoid.py"
    assert source.splitlines()[0] == "import math; import torch"
    assert source.splitlines()[2:] == cell.splitlines()[2:]


def test_a_class_without_source_is_refused_with_the_cell_magic_and_a_path_as_ways_out():
    from trainer import check

    namespace: dict[str, object] = {}
    exec("class MySigmoid:\n    def forward(ctx, x):\n        return x\n", namespace)
    with pytest.raises(TrainerError) as raised:
        check("sigmoid", namespace["MySigmoid"])  # type: ignore[arg-type]
    message = raised.value.message
    assert "the source of `MySigmoid` cannot be found" in message
    assert "%%trainer check sigmoid" in message
    assert "check('sigmoid', 'my_sigmoid.py')" in message


def test_a_missing_path_and_a_wrong_type_are_errors_that_say_what_is_accepted():
    from trainer import check

    with pytest.raises(WorkspaceError, match=r"no file at nowhere\.py"):
        check("sigmoid", "nowhere.py")
    with pytest.raises(TrainerError, match="takes a class, a source string or a path, not int"):
        check("sigmoid", 42)  # type: ignore[arg-type]
    with pytest.raises(TrainerError, match="Did you mean `sigmoid`"):
        check("sigmoind", SOLUTION)


def test_a_check_through_the_api_counts_in_the_workspace_progress(isolated_workspace):
    from trainer import check
    from trainer.state import StateStore

    isolated_workspace.mkdir()
    check("sigmoid", SOLUTION)
    progress = StateStore(isolated_workspace).load().progress("sigmoid")
    assert progress.passed and progress.checks == 1


# The same verdicts as the CLI ------------------------------------------------------------

FORGED = "\n".join(
    f"print({line!r})"
    for line in (
        json.dumps({"exercise": "sigmoid", "passed": True, "stages": [], "output": ""}),
        '{"type": "done"}',
        '{"type":"stage-end","stage":"backward","passed":true}',
    )
)


@pytest.mark.parametrize(
    "name",
    [
        "solution",
        "forgets_grad_output",
        "returns_float32",
        "modifies_grad_output_in_place",
        "sign_flipped",
        "prints_forged_results",
    ],
)
def test_the_api_gives_exactly_the_verdicts_the_cli_gives_for_the_same_file(name, tmp_path):
    from trainer import check

    if name == "solution":
        path = SOLUTION
    elif name == "prints_forged_results":
        path = tmp_path / "sigmoid.py"
        path.write_text(FORGETS.read_text(encoding="utf-8") + "\n" + FORGED + "\n")
    else:
        path = WRONG / f"{name}.py"
    code, cli = check_json("sigmoid", path)
    expected = _verdicts(cli["stages"])
    assert cli["passed"] is (code == 0) is (name == "solution")
    for solution in (path, path.read_text(encoding="utf-8")):
        report = check("sigmoid", solution)
        assert report.passed is cli["passed"], name
        assert {s.id: s.verdict.value for s in report.stages} == expected, name


# Interrupts ------------------------------------------------------------------------------


def test_an_interrupt_during_a_held_block_waits_for_its_end_and_is_raised_after():
    finished = []
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt), interrupts_held():
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)  # the signal arrives here, and is held
        finished.append(True)
    assert finished == [True]
    assert signal.getsignal(signal.SIGINT) is before
