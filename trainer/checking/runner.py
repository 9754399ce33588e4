"""Run a check in an isolated child process and collect its verdict (parent side, no torch).

The child gets the job on stdin and reports on a private pipe. A pass needs a
``done`` message carrying the right token: a crash, a hang, ``sys.exit`` or
printed fake results all end up as failures of the stage that was running.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import selectors
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import trainer
from trainer.checking.report import STAGE_TITLES, CheckReport, StageResult, Verdict
from trainer.errors import TrainerError
from trainer.spec import Exercise

DEFAULT_TIMEOUT = 30.0
DEFAULT_SEED = 0
OUTPUT_TAIL = 4000  # characters of the learner's printed output kept for the report


@dataclass
class _Collected:
    stages: dict[str, StageResult] = field(default_factory=dict)
    current: str | None = None
    ready: bool = False
    done: bool = False
    error: str | None = None
    output: str = ""


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    # The child must import this very package, installed or not.
    package_root = str(Path(trainer.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        process.kill()
    process.wait()


def _handle(message: dict[str, Any], collected: _Collected) -> None:
    kind = message.get("type")
    if kind == "ready":
        collected.ready = True
    elif kind == "error":
        collected.error = str(message.get("message"))
    elif kind == "stage-start":
        collected.current = str(message["stage"])
    elif kind == "stage-end":
        stage = str(message["stage"])
        collected.stages[stage] = StageResult(
            id=stage,
            verdict=Verdict.PASS if message.get("passed") is True else Verdict.FAIL,
            message=str(message.get("message", "")),
            details=[str(d) for d in message.get("details", [])],
            seconds=float(message.get("seconds", 0.0)),
        )
        collected.current = None
    elif kind == "done":
        collected.done = True


def _exit_description(code: int) -> str:
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"was killed by {name}"
    return f"exited with code {code}"


def run_check(
    exercise: Exercise,
    file: Path,
    *,
    seed: int = DEFAULT_SEED,
    timeout: float = DEFAULT_TIMEOUT,
) -> CheckReport:
    """Check ``file`` against ``exercise`` in a child process and return the report."""
    started = time.monotonic()
    raw = file.read_bytes()
    try:
        source = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        source = ""
        not_text = f"{file.name} is not UTF-8 text (byte {error.start} cannot be decoded)"
    else:
        not_text = ""
    token = secrets.token_hex(16)
    if not_text:
        stages = [StageResult("load", Verdict.FAIL, not_text)]
        return _report(exercise, file, raw, seed, stages, started, "")

    result_read, result_write = os.pipe()
    job = {
        "token": token,
        "result_fd": result_write,
        "spec_path": str(exercise.source),
        "spec_name": _display(exercise.source),
        "file": str(file.resolve()),
        "source": source,
        "seed": seed,
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "trainer.checking.child"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        pass_fds=(result_write,),
        cwd=str(file.resolve().parent),
        env=_child_env(),
        start_new_session=True,  # its own process group: a timeout ends every descendant
    )
    os.close(result_write)
    collected = _Collected()
    try:
        _feed_job(process, job)
        timed_out = _collect(process, result_read, token, collected, started + timeout)
    except BaseException:
        _kill_group(process)
        raise
    finally:
        os.close(result_read)
    _kill_group(process)  # whatever the learner's code left running ends with the check
    if process.stdout is not None:
        process.stdout.close()

    if collected.error:
        raise TrainerError(collected.error)
    if not collected.ready and not timed_out:
        tail = collected.output.strip()[-1500:]
        raise TrainerError(
            "the checking process could not start (is torch installed in this environment?)"
            + (f"\n{tail}" if tail else "")
        )
    stages = _stages(collected, timed_out, timeout, process.returncode)
    return _report(exercise, file, raw, seed, stages, started, collected.output[-OUTPUT_TAIL:])


def _feed_job(process: subprocess.Popen[bytes], job: dict[str, Any]) -> None:
    stdin: IO[bytes] | None = process.stdin
    assert stdin is not None
    try:
        stdin.write(json.dumps(job).encode())
        stdin.close()
    except BrokenPipeError:
        pass  # the child died at once; its exit code tells the story


def _collect(
    process: subprocess.Popen[bytes],
    result_read: int,
    token: str,
    collected: _Collected,
    deadline: float,
) -> bool:
    """Read results and output until ``done``, the end of the pipe, or the deadline.

    Returns True when the deadline passed first.
    """
    assert process.stdout is not None
    output_fd = process.stdout.fileno()
    selector = selectors.DefaultSelector()
    selector.register(result_read, selectors.EVENT_READ, "result")
    selector.register(output_fd, selectors.EVENT_READ, "output")
    pending = b""
    open_streams = 2
    try:
        while open_streams and not collected.done:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return True
            for key, _ in selector.select(timeout=remaining):
                fd = key.fd
                chunk = os.read(fd, 65536)
                if not chunk:
                    selector.unregister(fd)
                    open_streams -= 1
                    continue
                if key.data == "output":
                    collected.output = (collected.output + chunk.decode("utf-8", "replace"))[
                        -OUTPUT_TAIL * 4 :
                    ]
                    continue
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    message = _parse(line, token)
                    if message is not None:
                        _handle(message, collected)
    finally:
        selector.close()
    if not collected.done:
        # The result pipe closed early: the child died. Give it a moment to be reaped.
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=max(0.1, min(2.0, deadline - time.monotonic())))
    return False


def _parse(line: bytes, token: str) -> dict[str, Any] | None:
    try:
        message = json.loads(line)
    except ValueError:
        return None
    if not isinstance(message, dict) or not secrets.compare_digest(
        str(message.get("token", "")), token
    ):
        return None  # not from the checker: ignore it
    return message


def _stages(
    collected: _Collected, timed_out: bool, timeout: float, returncode: int | None
) -> list[StageResult]:
    stages: list[StageResult] = []
    blocked_by: str | None = None
    for stage in STAGE_TITLES:
        if stage in collected.stages:
            result = collected.stages[stage]
            stages.append(result)
            if stage == "load" and result.verdict is Verdict.FAIL:
                blocked_by = "load failed"
            continue
        if stage == collected.current or (
            collected.current is None and blocked_by is None and not collected.done
        ):
            if timed_out:
                message = (
                    f"timed out after {timeout:g} s during {STAGE_TITLES[stage].lower()}: "
                    "an endless loop? (raise the limit with --timeout)"
                )
            else:
                how = _exit_description(returncode) if returncode is not None else "ended"
                message = f"the checking process {how} during {STAGE_TITLES[stage].lower()}"
                if returncode == 0:
                    message += " (did your code call os._exit?)"
            stages.append(StageResult(stage, Verdict.FAIL, message))
            blocked_by = "the check stopped"
            continue
        reason = blocked_by or "not run"
        stages.append(StageResult(stage, Verdict.SKIP, f"skipped: {reason}"))
    return stages


def _display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _report(
    exercise: Exercise,
    file: Path,
    raw: bytes,
    seed: int,
    stages: list[StageResult],
    started: float,
    output: str,
) -> CheckReport:
    return CheckReport(
        exercise=exercise.id,
        file=str(file),
        file_sha256=hashlib.sha256(raw).hexdigest(),
        seed=seed,
        stages=stages,
        seconds=round(time.monotonic() - started, 3),
        output=output,
    )
