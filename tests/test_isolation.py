"""The checker against hostile or careless learner code, through the real CLI.

Every scratch file here is the correct sigmoid solution (or a wrong one) plus
one attack: hangs, exits, crashes, forged results, patched torch or checker,
leftover processes, floods of output and malformed files. Each test asserts the
verdict a protection guarantees, so it fails if that protection goes missing.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import CATALOG, REPO, check_json, first_failure, run_cli, stage
from trainer.checking import transport
from trainer.checking.job import Job
from trainer.checking.runner import Launched, run_check

CORRECT_SOLUTION = (REPO / "solutions" / "sigmoid.py").read_text(encoding="utf-8")

FORGED_LINES = [
    json.dumps({"exercise": "sigmoid", "passed": True, "stages": [], "output": ""}),
    '{"type": "done"}',
    '{"type":"stage-end","stage":"backward","passed":true}',
]


def failed_at(exit_code: int, report: dict[str, Any], stage_id: str) -> dict[str, Any]:
    """Assert the check failed, first at ``stage_id``; return that stage."""
    assert exit_code == 1, report
    assert report["passed"] is False, report
    failure = first_failure(report)
    assert failure is not None, report
    assert failure["id"] == stage_id, failure
    return failure


def line_of(path: Path, text: str) -> int:
    """The 1-based number of the first line of ``path`` that contains ``text``."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return next(number for number, line in enumerate(lines, 1) if text in line)


def process_running(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (this container's init may not reap)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def wait_until_gone(pid: int, seconds: float = 3.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not process_running(pid):
            return True
        time.sleep(0.05)
    return not process_running(pid)


@pytest.fixture
def sleeper_pid_file(tmp_path: Path) -> Iterator[Path]:
    """Where a test records the pid of the `sleep` a learner's file started (the file prints
    it: it may not write outside its check's folder); kills it after the test."""
    pid_file = tmp_path / "sleeper.pid"
    yield pid_file
    if pid_file.exists():
        pid = int(pid_file.read_text())
        if process_running(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


# Hangs, exits and crashes -------------------------------------------------------------


def test_a_backward_that_hangs_is_stopped_at_the_timeout_and_names_the_stage(write_file):
    path = write_file(
        "hangs.py",
        """\
        import torch


        class MySigmoid(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                output = torch.sigmoid(x)
                ctx.save_for_backward(output)
                return output

            @staticmethod
            def backward(ctx, grad_output):
                while True:
                    pass
        """,
    )
    started = time.monotonic()
    exit_code, report = check_json("sigmoid", path, "--timeout", "2.5")
    elapsed = time.monotonic() - started

    failure = failed_at(exit_code, report, "backward")
    assert "timed out" in failure["message"]
    assert "backward" in failure["message"].lower()
    assert stage(report, "gradcheck")["verdict"] == "skip"
    assert elapsed < 20, f"the check took {elapsed:.1f} s with --timeout 2.5"


def test_a_forward_that_calls_os_exit_fails_at_forward_and_says_the_process_ended(write_file):
    path = write_file(
        "os_exit.py",
        """\
        import os

        import torch


        class MySigmoid(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                os._exit(0)

            @staticmethod
            def backward(ctx, grad_output):
                return grad_output
        """,
    )
    exit_code, report = check_json("sigmoid", path)

    failure = failed_at(exit_code, report, "forward")
    assert "exited with code 0" in failure["message"]
    assert "os._exit" in failure["message"]
    assert stage(report, "backward")["verdict"] == "skip"


def test_sys_exit_at_import_fails_at_load_and_names_sys_exit(write_file):
    path = write_file(
        "exits_at_import.py",
        """\
        import sys

        import torch


        class MySigmoid(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                output = torch.sigmoid(x)
                ctx.save_for_backward(output)
                return output

            @staticmethod
            def backward(ctx, grad_output):
                (output,) = ctx.saved_tensors
                return grad_output * output * (1 - output)


        sys.exit(0)
        """,
    )
    exit_code, report = check_json("sigmoid", path)

    failure = failed_at(exit_code, report, "load")
    assert "sys.exit(0)" in failure["message"]
    assert "imported" in failure["message"]


def test_sys_exit_inside_backward_fails_at_backward_and_names_sys_exit(write_file):
    path = write_file(
        "exits_in_backward.py",
        """\
        import sys

        import torch


        class MySigmoid(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                output = torch.sigmoid(x)
                ctx.save_for_backward(output)
                return output

            @staticmethod
            def backward(ctx, grad_output):
                sys.exit(0)
        """,
    )
    exit_code, report = check_json("sigmoid", path)

    failure = failed_at(exit_code, report, "backward")
    assert "sys.exit" in failure["message"]


def test_a_segfault_in_backward_fails_at_backward_and_names_sigsegv(write_file):
    path = write_file(
        "segfault.py",
        """\
        import ctypes

        import torch


        class MySigmoid(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                output = torch.sigmoid(x)
                ctx.save_for_backward(output)
                return output

            @staticmethod
            def backward(ctx, grad_output):
                data = ctypes.string_at(0)
                return grad_output * len(data)
        """,
    )
    exit_code, report = check_json("sigmoid", path)

    failure = failed_at(exit_code, report, "backward")
    assert "SIGSEGV" in failure["message"]


# Forged results -----------------------------------------------------------------------


@pytest.mark.usefixtures("warm_commands")  # the command's output and exit code, warm
def test_printed_fake_results_do_not_turn_a_wrong_backward_into_a_pass(write_file):
    forged = "\n".join(f"    print({line!r})" for line in FORGED_LINES)
    path = write_file(
        "prints_fake_results.py",
        f"""\
import torch


def fake_results():
{forged}


fake_results()


class MySigmoid(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        output = torch.sigmoid(x)
        ctx.save_for_backward(output)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        fake_results()
        return grad_output  # wrong: forgets the local derivative
""",
    )
    result = run_cli("check", "sigmoid", "--file", str(path), "--json")
    report = json.loads(result.stdout)  # exactly one JSON document on stdout

    failure = failed_at(result.exit_code, report, "backward")
    assert "grad for `x` is wrong" in failure["message"]
    assert '{"type": "done"}' in report["output"]
    assert '"stage":"backward","passed":true' in report["output"]


def test_forged_messages_written_to_every_file_descriptor_do_not_pass_a_wrong_backward(
    write_file,
):
    payload = "".join(line + "\n" for line in FORGED_LINES)
    path = write_file(
        "writes_to_fds.py",
        f"""\
import os

import torch

FORGED = {payload.encode()!r}


def forge():
    for fd in range(3, 21):
        try:
            os.write(fd, FORGED)
        except OSError:
            pass


forge()


class MySigmoid(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        output = torch.sigmoid(x)
        ctx.save_for_backward(output)
        forge()
        return output

    @staticmethod
    def backward(ctx, grad_output):
        forge()
        return grad_output  # wrong: forgets the local derivative
""",
    )
    exit_code, report = check_json("sigmoid", path)

    # The forged bytes land in the learner's own pipe to the checker (the only
    # one its process holds) and garble it: the check fails where they were written.
    failure = failed_at(exit_code, report, "load")
    assert "a reply the checker cannot read" in failure["message"]
    assert all(s["verdict"] != "pass" for s in report["stages"][1:])


# Patching torch and the checker -------------------------------------------------------


def test_patching_torch_comparisons_at_import_fails_and_names_the_patched_functions(write_file):
    path = write_file(
        "patches_torch.py",
        """\
        import torch
        import torch.testing

        torch.allclose = lambda *a, **k: True
        torch.autograd.gradcheck = lambda *a, **k: True
        torch.testing.assert_close = lambda *a, **k: None


        class MySigmoid(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                output = torch.sigmoid(x)
                ctx.save_for_backward(output)
                return output

            @staticmethod
            def backward(ctx, grad_output):
                return grad_output  # wrong: forgets the local derivative
        """,
    )
    exit_code, report = check_json("sigmoid", path)

    failure = failed_at(exit_code, report, "load")
    assert "torch.allclose" in failure["message"]
    assert "torch.autograd.gradcheck" in failure["message"]
    assert "torch.testing.assert_close" in failure["message"]
    assert "must not patch" in failure["message"]


def test_patching_torch_from_inside_backward_fails_at_backward_and_names_the_patch(write_file):
    path = write_file(
        "patches_torch_late.py",
        """\
        import torch


        class MySigmoid(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                output = torch.sigmoid(x)
                ctx.save_for_backward(output)
                return output

            @staticmethod
            def backward(ctx, grad_output):
                torch.allclose = lambda *a, **k: True
                torch.autograd.gradcheck = lambda *a, **k: True
                return grad_output  # wrong: forgets the local derivative
        """,
    )
    exit_code, report = check_json("sigmoid", path)

    failure = failed_at(exit_code, report, "backward")
    assert "torch.allclose" in failure["message"]


# A right gradient written in another Function, and the learner's class (whose backward
# is wrong) made to hand autograd that Function's graph, or its backward.
_CHEAT = """\
import torch


class Cheat(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.sigmoid(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        return grad_output * y * (1 - y)


def cheat_backward(node, *grads):
    return Cheat.backward(node, *grads)

{before}
class MySigmoid(torch.autograd.Function{metaclass}):
    @staticmethod
    def forward(ctx, x):
{in_forward}        y = torch.sigmoid(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output  # wrong: forgets the local derivative

{after}"""

_ROUTES = {
    # A metaclass whose `apply` is the other Function's: its graph, its backward.
    "a metaclass's apply": (
        dict(
            before="""
class Routed(type(torch.autograd.Function)):
    @property
    def apply(cls):
        return Cheat.apply

""",
            metaclass=", metaclass=Routed",
            after="Cheat._backward_cls._forward_cls = MySigmoid\n"
            "Cheat._backward_cls.apply = cheat_backward\n",
        ),
        "load",
        "metaclass of its own",
    ),
    # The other Function's node class in place of its own, made to look like it.
    "a borrowed node class": (
        dict(
            after="Cheat._backward_cls._forward_cls = MySigmoid\n"
            "Cheat._backward_cls.apply = cheat_backward\n"
            "MySigmoid._backward_cls = Cheat._backward_cls\n"
        ),
        "load",
        "backward node class was replaced or changed",
    ),
    # Its own node class changed while forward runs, after the file loaded.
    "its node changed in forward": (
        dict(in_forward="        MySigmoid._backward_cls.apply = cheat_backward\n"),
        "forward",
        "not produced by `MySigmoid.apply`",
    ),
    # torch's own node base class patched: every node calls the other backward.
    "torch's node base patched": (
        dict(after="torch.autograd.function.BackwardCFunction.apply = cheat_backward\n"),
        "load",
        "BackwardCFunction.apply",
    ),
}


@pytest.mark.parametrize("route", list(_ROUTES))
def test_a_wrong_backward_routed_to_a_right_one_elsewhere_fails(write_file, route):
    """The gradients would be right, but not computed by the class under check: each
    route is refused where it shows, with words that say what was done. Remove the
    metaclass or the node-class check at load, the node check on each forward's
    graph (learner/serve), or the guard on BackwardCFunction, and its case fails."""
    parts, stage_id, words = _ROUTES[route]
    source = _CHEAT.format(
        **({"before": "", "metaclass": "", "in_forward": "", "after": ""} | parts)
    )
    path = write_file("routes_backward.py", source)
    exit_code, report = check_json("sigmoid", path)

    failure = failed_at(exit_code, report, stage_id)
    assert words in failure["message"], failure


def test_a_backward_that_goes_wrong_after_many_calls_cannot_hide_behind_another_in_the_state_stage(
    write_file,
):
    """Its backward goes wrong after 300 calls, which only the state stage's calls in a
    row reach; so, when the call stack says the state stage is running, forward hands
    autograd another Function's node. Every graph a stage's calls build must be the
    class's own: remove that check from the learner process's calls in a row (serve's
    _outputs) and this file passes every stage."""
    path = write_file(
        "hides_in_the_state_stage.py",
        """\
        import sys

        import torch

        CALLS = []


        class Right(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                y = torch.sigmoid(x)
                ctx.save_for_backward(y)
                return y

            @staticmethod
            def backward(ctx, grad_output):
                (y,) = ctx.saved_tensors
                return grad_output * y * (1 - y)


        def in_calls_in_a_row():
            frame = sys._getframe()
            while frame is not None:
                if frame.f_code.co_name == "_train":
                    return True
                frame = frame.f_back
            return False


        class MySigmoid(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                node = MySigmoid._backward_cls
                if in_calls_in_a_row():
                    node.apply = lambda self, *grads: Right.backward(self, *grads)
                elif "apply" in vars(node):
                    del node.apply
                y = torch.sigmoid(x)
                ctx.save_for_backward(y)
                return y

            @staticmethod
            def backward(ctx, grad_output):
                CALLS.append(1)
                (y,) = ctx.saved_tensors
                factor = 0.5 if len(CALLS) > 300 else 1.0  # wrong after 300 calls
                return factor * grad_output * y * (1 - y)
        """,
    )
    exit_code, report = check_json("sigmoid", path)

    failure = failed_at(exit_code, report, "state")
    assert (
        "not produced by `MySigmoid.apply`, or its graph node was changed" in failure["message"]
    ), failure


def test_a_backward_that_cannot_be_differentiated_cannot_hide_behind_another_for_second_order(
    write_file,
):
    """Its backward detaches (right first derivatives, no second ones); when the call
    stack says second derivatives are being taken, forward hands autograd another
    Function's node, differentiable. Refused in every request that builds a graph:
    remove the check from the second-order calls (api_calls) and the second-order
    stage passes; from the double-backward call (serve), and that stage passes."""
    path = write_file(
        "hides_from_second_order.py",
        """\
        import sys

        import torch


        class Right(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                y = torch.sigmoid(x)
                ctx.save_for_backward(y)
                return y

            @staticmethod
            def backward(ctx, grad_output):
                (y,) = ctx.saved_tensors
                return grad_output * y * (1 - y)


        def taking_second_derivatives():
            frame = sys._getframe()
            while frame is not None:
                if frame.f_code.co_name in ("handle_second_order", "_double"):
                    return True
                frame = frame.f_back
            return False


        class MySigmoid(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                node = MySigmoid._backward_cls
                if taking_second_derivatives():
                    node.apply = lambda self, *grads: Right.backward(self, *grads)
                elif "apply" in vars(node):
                    del node.apply
                y = torch.sigmoid(x)
                ctx.save_for_backward(y)
                return y

            @staticmethod
            def backward(ctx, grad_output):
                (y,) = ctx.saved_tensors
                return (grad_output * y * (1 - y)).detach()  # no second derivatives
        """,
    )
    exit_code, report = check_json("sigmoid", path, "--double-backward")

    failure = failed_at(exit_code, report, "second_order")
    assert "or its graph node was changed" in failure["message"], failure
    double = stage(report, "double_backward")
    assert double["verdict"] == "fail", double
    assert "or its graph node was changed" in double["message"], double


def test_patching_tensor_subtraction_fails_even_with_a_correct_backward(write_file):
    path = write_file(
        "patches_sub.py",
        """\
        import torch


        class MySigmoid(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                output = torch.sigmoid(x)
                ctx.save_for_backward(output)
                return output

            @staticmethod
            def backward(ctx, grad_output):
                (output,) = ctx.saved_tensors
                result = grad_output * output * (1 - output)
                torch.Tensor.__sub__ = lambda self, other: torch.zeros_like(self)
                return result
        """,
    )
    exit_code, report = check_json("sigmoid", path)

    failure = failed_at(exit_code, report, "backward")
    assert "torch.Tensor.__sub__" in failure["message"]


def test_the_guard_finds_every_kind_of_patch_whenever_it_was_made():
    """The learner process's guard, in this process: a name replaced with setattr,
    written into the namespace, deleted, or replaced by another thread between two of
    its checks, is reported and put back; a namespace left alone, or put back, is not."""
    import threading

    import numpy
    import torch

    from trainer.checking.learner.guard import NamespaceGuard

    def fake(*args: object) -> None:  # not torch's own (torch's own replacements are kept)
        return None

    def names(patched: list[str]) -> list[str]:
        return [p.split(" ")[0] for p in patched]  # without "(by file, line n)"

    guard = NamespaceGuard.for_torch([torch.Tensor, torch.autograd.Function])
    sigmoid, exp, pi = torch.sigmoid, torch.exp, numpy.pi
    assert guard.restore() == []
    torch.sigmoid = fake  # type: ignore[assignment]
    assert names(guard.restore()) == ["torch.sigmoid"]
    vars(torch)["exp"] = fake
    del numpy.pi
    assert names(guard.restore()) == ["numpy.pi", "torch.exp"]
    assert (torch.sigmoid, torch.exp, numpy.pi) == (sigmoid, exp, pi)
    assert guard.restore() == []
    patcher = threading.Thread(target=setattr, args=(torch, "sigmoid", fake))
    patcher.start()
    patcher.join()
    assert names(guard.restore()) == ["torch.sigmoid"]
    assert torch.sigmoid is sigmoid
    torch.sigmoid = fake  # type: ignore[assignment]
    torch.sigmoid = sigmoid  # replaced and put back: nothing to report
    assert guard.restore() == []


def test_the_guard_finds_a_class_patched_or_given_a_new_name_between_two_checks():
    """Classes are skipped while their dict's version tag is unchanged: a change of any
    kind must still be seen. Let ``restore`` skip every class and this test fails."""
    import torch

    from trainer.checking.learner.guard import NamespaceGuard

    def fake(*args: object) -> None:
        return None

    guard = NamespaceGuard.for_torch([torch.Tensor, torch.autograd.Function])
    assert guard.restore() == []
    torch.autograd.Function.trainer_probe = fake  # type: ignore[attr-defined]
    assert [p.split(" ")[0] for p in guard.restore()] == ["torch.autograd.Function.trainer_probe"]
    assert not hasattr(torch.autograd.Function, "trainer_probe")
    assert guard.restore() == []
    detach = torch.Tensor.detach
    torch.Tensor.detach = fake  # type: ignore[assignment]
    assert [p.split(" ")[0] for p in guard.restore()] == ["torch.Tensor.detach"]
    assert torch.Tensor.detach is detach


@pytest.mark.parametrize("change", ["module", "class"])
def test_a_guard_made_before_the_fork_serves_only_while_no_namespace_changed(change):
    """The zygote makes each learner process's guard once (``guard.prepare``); a change
    between that and the learner's start (an import rebinding a name, say) is no patch
    of the learner's: a guard made before it would report it and undo it. Drop the
    version checks of ``NamespaceGuard._still_fits`` and this test fails."""
    import numpy
    import torch

    from trainer.checking.learner import guard

    def fake(*args: object) -> None:
        return None

    classes = [torch.Tensor, torch.autograd.Function]
    pi = numpy.pi
    guard.prepare(classes)
    try:
        assert guard.NamespaceGuard.for_torch(classes) is guard._PREPARED[0]
        if change == "module":
            numpy.pi = 3.0  # type: ignore[misc]
        else:
            torch.autograd.Function.trainer_probe = fake  # type: ignore[attr-defined]
        made = guard.NamespaceGuard.for_torch(classes)
        assert made is not guard._PREPARED[0]
        assert made.restore() == []
        assert numpy.pi == 3.0 if change == "module" else torch.autograd.Function.trainer_probe  # type: ignore[attr-defined]
    finally:
        numpy.pi = pi  # type: ignore[misc]
        if hasattr(torch.autograd.Function, "trainer_probe"):
            del torch.autograd.Function.trainer_probe
        guard._PREPARED.clear()


def test_the_learner_forgets_every_module_of_ours_even_one_imported_after_the_zygote_listed_them():
    """``look_plain`` takes the zygote's list of the trainer's modules while sys.modules
    is unchanged since; a module of ours imported after that must leave too. Drop the
    version check of ``serve._our_modules`` and this test fails."""
    import types

    from trainer.checking.learner import guard, serve

    listed = [n for n in sys.modules if n == "trainer" or n.startswith("trainer.")]
    saved = list(serve._OURS)
    serve._OURS[:] = [guard.dict_version(sys.modules), listed]
    try:
        assert serve._our_modules() == listed
        sys.modules["trainer._imported_later"] = types.ModuleType("trainer._imported_later")
        assert "trainer._imported_later" in serve._our_modules()
    finally:
        sys.modules.pop("trainer._imported_later", None)
        serve._OURS[:] = saved


def test_the_checkers_comparison_is_not_in_the_learners_process_to_patch(write_file):
    path = write_file(
        "patches_checker.py",
        """\
        import sys

        import torch

        for module in list(sys.modules.values()):
            if "compare_tensor" in vars(module):
                module.compare_tensor = lambda *a, **k: None
                raise SystemExit("found the checker's comparison")


        class MySigmoid(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                output = torch.sigmoid(x)
                ctx.save_for_backward(output)
                return output

            @staticmethod
            def backward(ctx, grad_output):
                return grad_output  # wrong: forgets the local derivative
        """,
    )
    exit_code, report = check_json("sigmoid", path)

    failure = failed_at(exit_code, report, "backward")
    assert "wrong" in failure["message"]


# Leftover processes -------------------------------------------------------------------


CORRECT_FORWARD = """\
        output = torch.sigmoid(x)
        ctx.save_for_backward(output)
        return output"""
CORRECT_BACKWARD = """\
        (output,) = ctx.saved_tensors
        return grad_output * output * (1 - output)"""
# A hang that waits (the timeout is the same as for a spin; the busy hang has its test above).
HANG = """\
        import time
        time.sleep(3600)"""


# The learner's process may start no process at all (its test is in test_protection);
# where a machine cannot refuse them (no PID namespace, no seccomp), the layers beneath
# must still end whatever it started: these tests leave that protection out to prove them.
WITH_CHILDREN = ("--leave-out", "processes")


def _starts_a_sleeper(
    *,
    forward: str = CORRECT_FORWARD,
    backward: str = CORRECT_BACKWARD,
    popen_options: str = "",
) -> str:
    """A solution that starts `sleep 300` at import and prints its pid (see :func:`sleeper_pid`)."""
    return f"""\
import os
import subprocess

import torch

sleeper = subprocess.Popen(["sleep", "300"]{popen_options})
print("sleeper pid", sleeper.pid, flush=True)


class MySigmoid(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
{forward}

    @staticmethod
    def backward(ctx, grad_output):
{backward}
"""


def sleeper_pid(report: dict[str, Any], pid_file: Path) -> int:
    """The pid the learner's file printed, recorded in ``pid_file`` for the fixture."""
    found = re.search(r"sleeper pid (\d+)", report["output"])
    assert found, report["output"]
    pid_file.write_text(found.group(1))
    return int(found.group(1))


def test_a_process_started_by_the_learners_code_does_not_outlive_the_check(
    write_file, sleeper_pid_file
):
    path = write_file("starts_sleeper.py", _starts_a_sleeper())
    exit_code, report = check_json("sigmoid", path, *WITH_CHILDREN)

    assert exit_code == 0, report
    assert report["passed"] is True
    pid = sleeper_pid(report, sleeper_pid_file)
    assert wait_until_gone(pid), f"`sleep` (pid {pid}) is still running after the check"


def test_a_process_started_before_a_hang_does_not_outlive_the_timeout(write_file, sleeper_pid_file):
    path = write_file("starts_sleeper_then_hangs.py", _starts_a_sleeper(backward=HANG))
    exit_code, report = check_json("sigmoid", path, "--timeout", "2.5", *WITH_CHILDREN)

    failure = failed_at(exit_code, report, "backward")
    assert "timed out" in failure["message"]
    pid = sleeper_pid(report, sleeper_pid_file)
    assert wait_until_gone(pid), f"`sleep` (pid {pid}) is still running after the timeout"


# Output, encodings and malformed files ------------------------------------------------


def test_a_flood_of_prints_does_not_block_the_verdict_of_a_correct_solution(write_file):
    path = write_file(
        "prints_a_lot.py",
        """\
        import torch

        printed = []


        class MySigmoid(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                if not printed:
                    printed.append(True)
                    for i in range(200_000):
                        print(f"line {i} of a learner's debugging output")
                output = torch.sigmoid(x)
                ctx.save_for_backward(output)
                return output

            @staticmethod
            def backward(ctx, grad_output):
                (output,) = ctx.saved_tensors
                return grad_output * output * (1 - output)
        """,
    )
    exit_code, report = check_json("sigmoid", path, "--timeout", "20")

    assert exit_code == 0, first_failure(report)
    assert report["passed"] is True


def test_a_correct_solution_with_crlf_line_endings_and_a_utf8_bom_passes(tmp_path):
    path = tmp_path / "windows.py"
    path.write_bytes(b"\xef\xbb\xbf" + CORRECT_SOLUTION.replace("\n", "\r\n").encode("utf-8"))
    assert b"\r\n" in path.read_bytes()
    exit_code, report = check_json("sigmoid", path)

    assert exit_code == 0, first_failure(report)
    assert report["passed"] is True


def test_a_syntax_error_fails_at_load_naming_the_file_and_line_with_a_caret(write_file):
    path = write_file(
        "syntax_error.py",
        """\
        import torch


        class MySigmoid(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x)
                output = torch.sigmoid(x)
                ctx.save_for_backward(output)
                return output
        """,
    )
    line = line_of(path, "def forward(ctx, x)")
    exit_code, report = check_json("sigmoid", path)

    failure = failed_at(exit_code, report, "load")
    assert "syntax_error.py" in failure["message"]
    assert f"line {line}" in failure["message"]
    assert any(detail.strip() == "^" for detail in failure["details"]), failure["details"]


def test_an_exception_at_import_fails_at_load_pointing_at_the_learners_line_only(write_file):
    path = write_file(
        "raises_at_import.py",
        """\
        import torch


        def scale():
            return 1 / 0


        class MySigmoid(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                output = torch.sigmoid(x)
                ctx.save_for_backward(output)
                return output

            @staticmethod
            def backward(ctx, grad_output):
                (output,) = ctx.saved_tensors
                return grad_output * output * (1 - output)


        FACTOR = scale()
        """,
    )
    division = line_of(path, "1 / 0")
    exit_code, report = check_json("sigmoid", path)

    failure = failed_at(exit_code, report, "load")
    assert "ZeroDivisionError" in failure["message"]
    details = "\n".join(failure["details"])
    assert f"raises_at_import.py, line {division}" in details
    assert "trainer/checking" not in details
    assert "trainer/checking" not in failure["message"]
    # Only the learner's frames, each with its line of source: none of the checker's,
    # whatever name they go by in the learner's process.
    frames = [line for line in failure["details"] if not line.startswith("    ")]
    assert frames == [
        f"raises_at_import.py, line {line_of(path, 'FACTOR = scale()')}, in <module>",
        f"raises_at_import.py, line {division}, in scale",
    ], failure["details"]


def test_a_class_with_another_name_fails_at_load_saying_what_was_found(write_file):
    path = write_file(
        "wrong_name.py",
        """\
        import torch


        class Sigmoid(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                output = torch.sigmoid(x)
                ctx.save_for_backward(output)
                return output

            @staticmethod
            def backward(ctx, grad_output):
                (output,) = ctx.saved_tensors
                return grad_output * output * (1 - output)
        """,
    )
    exit_code, report = check_json("sigmoid", path)

    failure = failed_at(exit_code, report, "load")
    assert "no class `MySigmoid`" in failure["message"]
    assert "found: `Sigmoid`" in failure["message"]


def test_a_backward_that_is_not_a_staticmethod_fails_at_load(write_file):
    path = write_file(
        "not_static.py",
        """\
        import torch


        class MySigmoid(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                output = torch.sigmoid(x)
                ctx.save_for_backward(output)
                return output

            def backward(ctx, grad_output):
                (output,) = ctx.saved_tensors
                return grad_output * output * (1 - output)
        """,
    )
    exit_code, report = check_json("sigmoid", path)

    failure = failed_at(exit_code, report, "load")
    assert "backward" in failure["message"]
    assert "@staticmethod" in failure["message"]


def test_a_forward_that_returns_a_tuple_fails_at_forward_mentioning_the_tuple(write_file):
    path = write_file(
        "returns_tuple.py",
        """\
        import torch


        class MySigmoid(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                output = torch.sigmoid(x)
                ctx.save_for_backward(output)
                return (output,)

            @staticmethod
            def backward(ctx, grad_output):
                (output,) = ctx.saved_tensors
                return grad_output * output * (1 - output)
        """,
    )
    exit_code, report = check_json("sigmoid", path)

    failure = failed_at(exit_code, report, "forward")
    assert "tuple" in failure["message"]


def test_input_in_backward_does_not_hang_and_fails_with_eoferror(write_file):
    path = write_file(
        "asks_for_input.py",
        """\
        import os

        import torch


        class MySigmoid(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                output = torch.sigmoid(x)
                ctx.save_for_backward(output)
                return output

            @staticmethod
            def backward(ctx, grad_output):
                print("stdin is", os.readlink("/proc/self/fd/0"), flush=True)
                input("press enter to continue")
                (output,) = ctx.saved_tensors
                return grad_output * output * (1 - output)
        """,
    )
    started = time.monotonic()
    exit_code, report = check_json("sigmoid", path, "--timeout", "10")
    elapsed = time.monotonic() - started

    failure = failed_at(exit_code, report, "backward")
    assert "EOFError" in failure["message"]
    assert "timed out" not in failure["message"]
    assert elapsed < 10, f"the check took {elapsed:.1f} s"
    # Not merely at the end of some pipe: the learner's stdin is /dev/null.
    assert f"stdin is {os.devnull}" in report["output"]


def test_the_untouched_stub_fails_at_backward_saying_it_is_not_written_yet(tmp_path):
    spec = yaml.safe_load((REPO / "exercises" / "sigmoid.yaml").read_text(encoding="utf-8"))
    path = tmp_path / "stub.py"
    path.write_text(spec["stub"], encoding="utf-8")
    exit_code, report = check_json("sigmoid", path)

    failure = failed_at(exit_code, report, "backward")
    assert "backward() is not written yet" in failure["message"]


def test_overriding_apply_to_use_torchs_own_autograd_fails_at_load(write_file):
    path = write_file(
        "overrides_apply.py",
        """\
        import torch


        class MySigmoid(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                output = torch.sigmoid(x)
                ctx.save_for_backward(output)
                return output

            @staticmethod
            def backward(ctx, grad_output):
                return grad_output  # wrong, but never called

            @staticmethod
            def apply(x):
                return torch.sigmoid(x)
        """,
    )
    exit_code, report = check_json("sigmoid", path)

    failure = failed_at(exit_code, report, "load")
    assert "`apply`" in failure["message"]


def test_a_learners_process_holds_no_descriptor_of_the_zygote_or_of_another_check(write_file):
    """Two checks at once on one server, each file listing its open descriptors (fstat
    needs no path, so Landlock allows it) while the other's process is alive: each
    holds its standard streams and its socket to its checker, nothing of the zygote
    (its epoll instance, shared with it, or its socket to the server) and nothing of
    the other check. Remove the clean-up in the zygote's fork and this test fails."""
    lister = """\
        import os
        import stat
        import time

        import torch

        _held = []
        for _fd in range(4096):
            try:
                _mode = os.fstat(_fd).st_mode
            except OSError:
                continue
            _held.append("socket" if stat.S_ISSOCK(_mode) else "fd %d" % _fd)
        print("HELD", sorted(_held), flush=True)
        time.sleep(1.0)  # alive while the other check's process starts
        """
    paths = [
        write_file(f"lists_{n}/sigmoid.py", textwrap.dedent(lister) + CORRECT_SOLUTION)
        for n in (1, 2)
    ]
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        reports = list(pool.map(lambda path: check_json("sigmoid", path)[1], paths))

    for report in reports:
        assert report["passed"], first_failure(report)
        held = [line for line in report["output"].splitlines() if line.startswith("HELD ")]
        assert held == ["HELD ['fd 0', 'fd 1', 'fd 2', 'socket']"], report["output"]


def test_the_learners_code_runs_with_the_garbage_collector_on_as_in_any_program(write_file):
    """The checking server imports torch with the collector off (faster) and turns it
    back on before any check: a learner's code that makes reference cycles must see
    them collected, as in a program of its own. Leave the collector off in the zygote
    and this test fails."""
    path = write_file(
        "collects.py",
        "import gc\n"
        "print('COLLECTOR', gc.isenabled(), gc.get_threshold()[0] > 0, flush=True)\n"
        + CORRECT_SOLUTION,
    )
    exit_code, report = check_json("sigmoid", path)

    assert exit_code == 0, first_failure(report)
    assert "COLLECTOR True True" in report["output"].splitlines(), report["output"]


# Gaps found while writing these tests, now closed ----------------------------------------


def test_an_exit_while_a_started_process_holds_the_output_is_reported_as_an_exit(
    write_file, sleeper_pid_file
):
    path = write_file(
        "exits_with_a_sleeper.py",
        _starts_a_sleeper(forward="        os._exit(0)"),
    )
    # A long limit: had the check waited for the output pipe (which the sleeper
    # holds) instead of the process, it would report a timeout, not the exit.
    exit_code, report = check_json("sigmoid", path, "--timeout", "120", *WITH_CHILDREN)

    failure = failed_at(exit_code, report, "forward")
    assert "exited with code 0" in failure["message"]
    assert "timed out" not in failure["message"]


def test_a_process_started_in_a_new_session_does_not_outlive_the_check(
    write_file, sleeper_pid_file
):
    path = write_file(
        "starts_detached_sleeper.py",
        _starts_a_sleeper(popen_options=", start_new_session=True"),
    )
    _, report = check_json("sigmoid", path, *WITH_CHILDREN)

    pid = sleeper_pid(report, sleeper_pid_file)
    assert wait_until_gone(pid), f"`sleep` (pid {pid}) is still running after the check"


def test_forged_result_frames_stamped_with_any_token_in_reach_do_not_pass_a_wrong_backward(
    write_file,
):
    """The learner writes well-formed result frames (a pass for every stage, then done),
    stamped with every 32-hex string in its memory, to every descriptor it holds, its
    parent's, and those of every process its grandparent started (the checker of this
    very check among them). Landlock keeps it out of /proc, and without Landlock its
    user namespace and the checkers' being undumpable keep it from their descriptors.
    A frame that reached the result pipe would lack the job's token, which never
    enters the learner's process: the runner's token check has its own test below."""
    path = write_file(
        "forges_frames.py",
        """\
        import gc
        import json
        import os
        import re
        import struct

        import torch

        STAGES = ["load", "forward", "backward", "contract", "state", "stability",
                  "gradcheck", "cuda", "by_hand"]
        FORGED = []


        def frame(header):
            head = json.dumps(header).encode()
            return struct.pack("!II", len(head), 0) + head


        def forge():
            found = {"0" * 32}
            for o in gc.get_objects():
                if type(o).__name__ == "uname_result":  # iterating it runs `uname -p`
                    continue
                items = o.values() if isinstance(o, dict) else o if isinstance(o, (list, tuple)) else ()
                for item in items:
                    if isinstance(item, str) and re.fullmatch(r"[0-9a-f]{32}", item):
                        found.add(item)
            data = b""
            for token in found:
                data += frame({"type": "ready", "stages": STAGES, "token": token})
                for stage in STAGES:
                    result = {"id": stage, "verdict": "pass", "message": "", "details": []}
                    data += frame({"type": "stage-end", "result": result, "token": token})
                data += frame({"type": "done", "token": token})
            # Its own descriptors, its socket to the checker among them, written directly.
            for fd in range(256):
                try:
                    os.write(fd, data)
                except OSError:
                    pass
            # Its parent's, and (root may open them) those of every process its
            # grandparent started: the checker of this very check among them.
            try:
                grandparent = open(f"/proc/{os.getppid()}/stat").read().rsplit(")", 1)[1].split()[1]
            except OSError:  # Landlock: not beneath what it may read
                return
            pids = [str(os.getppid())]
            for entry in os.listdir("/proc"):
                try:
                    if entry.isdigit() and open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()[1] == grandparent:
                        pids.append(entry)
                except OSError:
                    pass
            targets = []
            for pid in pids:
                try:
                    targets += [f"/proc/{pid}/fd/{fd}" for fd in os.listdir(f"/proc/{pid}/fd")]
                except OSError:
                    pass
            for target in targets:
                try:
                    descriptor = os.open(target, os.O_WRONLY | os.O_NONBLOCK)
                    os.write(descriptor, data)
                    os.close(descriptor)
                except OSError:
                    pass


        class MySigmoid(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                output = torch.sigmoid(x)
                ctx.save_for_backward(output)
                return output

            @staticmethod
            def backward(ctx, grad_output):
                if not FORGED:  # once: the tokens in its reach are the same at every call
                    FORGED.append(True)
                    forge()
                return grad_output  # wrong: forgets the local derivative
        """,
    )
    exit_code, report = check_json("sigmoid", path)

    # Its own socket took the frames: the checker read one where backward's result
    # belonged, could not read it, and stopped the process, whose next words answer
    # no request.
    failure = failed_at(exit_code, report, "backward")
    assert "backward's result the checker cannot read" in failure["message"], failure
    assert all(s["verdict"] == "skip" for s in report["stages"][3:]), report["stages"]


def test_a_well_formed_reply_forged_in_the_middle_of_a_stage_fails_that_stage(write_file):
    """A right backward that, once it has run many times (the state stage runs it
    hundreds of times in a row), writes a well-framed reply of its own to its socket
    to the checker. The stage that reads it, and decodes the values in it, fails
    saying the reply cannot be read, and the process is stopped: what it sends next
    answers no request. Without that, the stage's decoding error stops the checker
    itself ("the checker failed")."""
    path = write_file(
        "forges_a_reply.py",
        """\
        import json
        import os
        import struct

        import torch

        CALLS = []


        def forge_a_reply():
            head = json.dumps({"grads": "all of them, right"}).encode()
            frame = struct.pack("!II", len(head), 0) + head
            for fd in range(3, 64):
                try:
                    os.write(fd, frame)
                except OSError:
                    pass


        class MySigmoid(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                output = torch.sigmoid(x)
                ctx.save_for_backward(output)
                return output

            @staticmethod
            def backward(ctx, grad_output):
                CALLS.append(1)
                if len(CALLS) == 300:
                    forge_a_reply()
                (output,) = ctx.saved_tensors
                return grad_output * output * (1 - output)
        """,
    )
    exit_code, report = check_json("sigmoid", path)

    failure = failed_at(exit_code, report, "state")
    assert "a reply the checker cannot read" in failure["message"], failure
    assert all(s["verdict"] == "skip" for s in report["stages"][6:]), report["stages"]


class _ForgingService:
    """Stands in for the checking server. On the result pipe, in one read: the
    checker's own frames (backward failed), then forged ones (every stage passed,
    then done) stamped with anything but the job's token, then the checker's done."""

    def __init__(self, stages: list[str]) -> None:
        self.stages = stages
        self.sleeper: subprocess.Popen[bytes] | None = None
        self.generation = 1

    def died_since(self, generation: int, wait: float) -> bool:
        return False

    def launch(self, job: Job) -> Launched:
        def stream(stamp: dict[str, object], failing: str | None) -> bytes:
            frames = [transport.pack({"type": "ready", "stages": self.stages} | stamp)]
            for stage_id in self.stages:
                verdict = "fail" if stage_id == failing else "pass"
                result = {"id": stage_id, "verdict": verdict, "message": verdict, "details": []}
                frames.append(transport.pack({"type": "stage-end", "result": result} | stamp))
            return b"".join(frames)

        token = job.token
        stamps = ["0" * 32, token[::-1], token.upper(), token[:-1], None, 0, ""]
        forged = [
            stream({"token": t}, None) + transport.pack({"type": "done", "token": t})
            for t in stamps
        ]
        forged.append(stream({}, None) + transport.pack({"type": "done"}))
        result_read, result_write = os.pipe()
        output_read, output_write = os.pipe()
        genuine = stream({"token": token}, "backward")
        os.write(
            result_write,
            genuine + b"".join(forged) + transport.pack({"type": "done", "token": token}),
        )
        os.close(result_write)
        os.close(output_write)
        self.sleeper = subprocess.Popen(["sleep", "30"], start_new_session=True)
        return Launched(self.sleeper.pid, result_read, output_read)

    def exit_code(self, pid: int, wait: float) -> int | None:
        return 0

    def landed(self) -> None:
        return None


def test_frames_without_the_job_s_token_are_ignored_by_the_runner(tmp_path: Path):
    """In process, no torch: whatever reaches the result pipe, only frames stamped with
    this job's token count. Remove the runner's token check and the forged frames'
    passes overwrite the checker's failure."""
    exercise = CATALOG.get("sigmoid")
    path = tmp_path / "sigmoid.py"
    path.write_text(CORRECT_SOLUTION, encoding="utf-8")
    service = _ForgingService(list(exercise.stage_weights()))
    report = run_check(exercise, path, service=service)  # type: ignore[arg-type]
    assert service.sleeper is not None and service.sleeper.wait(timeout=5) == -signal.SIGKILL
    assert not report.passed
    assert [(s.id, s.verdict.value) for s in report.stages if s.verdict.value != "pass"] == [
        ("backward", "fail")
    ]
