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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import trainer
from trainer.checking.report import (
    REQUIRED_STAGES,
    STAGE_TITLES,
    CheckReport,
    StageResult,
    Verdict,
)
from trainer.errors import TrainerError
from trainer.spec import Exercise

if TYPE_CHECKING:
    from trainer.checking.warm import WarmChecker

DEFAULT_TIMEOUT = 30.0
DEFAULT_MEMORY_LIMIT_MB = 4096  # on top of what torch maps; enough for any exercise
DEFAULT_SEED = 0
OUTPUT_TAIL = 4000  # characters of the learner's printed output kept for the report


@dataclass
class _Collected:
    stage_ids: list[str] = field(default_factory=lambda: list(REQUIRED_STAGES))
    stages: dict[str, StageResult] = field(default_factory=dict)
    ready: bool = False
    done: bool = False
    error: str | None = None
    output: str = ""
    notes: list[str] = field(default_factory=list)


MARKER = "TRAINER_CHECK_ID"


def child_env(marker: str | None) -> dict[str, str]:
    env = dict(os.environ)
    # Inherited by every process the learner's code starts, even in a new
    # session: after the check, whatever carries it is ended.
    if marker:
        env[MARKER] = marker
    # The child must import this very package, installed or not.
    package_root = str(Path(trainer.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def _kill_marked(marker: str) -> None:
    """End every process whose environment carries this check's marker (Linux)."""
    needle = f"{MARKER}={marker}".encode()
    for _ in range(3):  # a process may start another while we look
        found = False
        for entry in Path("/proc").glob("[0-9]*"):
            try:
                environment = (entry / "environ").read_bytes()
            except OSError:
                continue
            if needle in environment.split(b"\0"):
                found = True
                with contextlib.suppress(ProcessLookupError, PermissionError, ValueError):
                    os.kill(int(entry.name), signal.SIGKILL)
        if not found:
            return


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
        stages = message.get("stages")
        if isinstance(stages, list) and all(s in STAGE_TITLES for s in stages):
            collected.stage_ids = [str(s) for s in stages]
    elif kind == "error":
        collected.error = str(message.get("message"))
    elif kind == "stage-end":
        stage = str(message["stage"])
        diagnosis = message.get("diagnosis")
        collected.stages[stage] = StageResult(
            id=stage,
            verdict=Verdict(message.get("verdict", "fail")),
            message=str(message.get("message", "")),
            details=[str(d) for d in message.get("details", [])],
            seconds=float(message.get("seconds", 0.0)),
            diagnosis=diagnosis if isinstance(diagnosis, dict) else None,
        )
        for note in message.get("notes", []):
            if str(note) not in collected.notes:
                collected.notes.append(str(note))
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


@dataclass
class Launched:
    """A running checking child, however it was started."""

    pid: int
    result_read: int
    output_read: int
    returncode: Callable[[float], int | None]  # waits up to the given seconds
    kill: Callable[[], None]  # ends the child and its whole process group


def run_check(
    exercise: Exercise,
    file: Path,
    *,
    seed: int = DEFAULT_SEED,
    timeout: float = DEFAULT_TIMEOUT,
    solution: Path | None = None,
    double_backward: bool = False,
    warm: WarmChecker | None = None,
    memory_limit_mb: int = DEFAULT_MEMORY_LIMIT_MB,
) -> CheckReport:
    """Check ``file`` against ``exercise`` in a child process and return the report.

    With ``warm``, the child is forked from a process that has imported torch
    already (watch mode, grading); otherwise a fresh interpreter starts.
    """
    started = time.monotonic()
    raw = file.read_bytes()  # one read: the verdict belongs to exactly this version
    try:
        source = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        stages = [
            StageResult(
                "load",
                Verdict.FAIL,
                f"{file.name} is not UTF-8 text (byte {error.start} cannot be decoded)",
            )
        ]
        return _report(exercise, file, raw, seed, stages, started, "")
    token = secrets.token_hex(16)
    marker = secrets.token_hex(8)
    job = {
        "spec_path": str(exercise.source.resolve()),
        "spec_name": _display(exercise.source),
        "file": str(file.resolve()),
        "cwd": str(file.resolve().parent),
        "source": source,
        "seed": seed,
        # The reference solution, run by the checker for advice (saved bytes).
        "solution": str(solution) if solution is not None else None,
        "double_backward": double_backward,
        "marker": marker,
        "memory_limit_mb": memory_limit_mb,
    }
    launched = warm.launch(job, token) if warm is not None else _launch_cold(job, token, marker)
    collected = _Collected()
    try:
        timed_out = _collect(launched, token, collected, started + timeout)
    finally:
        launched.kill()  # whatever the learner's code left running ends with the check
        _kill_marked(marker)
        os.close(launched.result_read)
        os.close(launched.output_read)
    returncode = None if collected.done else launched.returncode(2.0)

    if collected.error:
        raise TrainerError(collected.error)
    if not collected.ready and not timed_out:
        tail = collected.output.strip()[-1500:]
        raise TrainerError(
            "the checking process could not start (is torch installed in this environment?)"
            + (f"\n{tail}" if tail else "")
        )
    stages = _stages(collected, timed_out, timeout, returncode)
    report = _report(exercise, file, raw, seed, stages, started, collected.output[-OUTPUT_TAIL:])
    report.notes = collected.notes
    return report


def _launch_cold(job: dict[str, Any], token: str, marker: str) -> Launched:
    result_read, result_write = os.pipe()
    output_read, output_write = os.pipe()
    process = subprocess.Popen(
        [sys.executable, "-m", "trainer.checking.child"],
        stdin=subprocess.PIPE,
        stdout=output_write,
        stderr=output_write,
        pass_fds=(result_write,),
        cwd=job["cwd"],
        env=child_env(marker),
        start_new_session=True,  # its own process group: a timeout ends every descendant
    )
    os.close(result_write)
    os.close(output_write)
    _feed_job(process, {**job, "result_fd": result_write}, token)

    def returncode(wait: float) -> int | None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=wait)
        return process.returncode

    return Launched(process.pid, result_read, output_read, returncode, lambda: _kill_group(process))


def _feed_job(process: subprocess.Popen[bytes], job: dict[str, Any], token: str) -> None:
    stdin: IO[bytes] | None = process.stdin
    assert stdin is not None
    data = json.dumps(job).encode()  # never the token: it follows, read after the fork
    try:
        # The child reads the job, starts the learner's process, then the token.
        stdin.write(f"{len(data)}\n".encode() + data + f"{token}\n".encode())
        stdin.close()
    except BrokenPipeError:
        pass  # the child died at once; its exit code tells the story


def _collect(launched: Launched, token: str, collected: _Collected, deadline: float) -> bool:
    """Read results and output until ``done``, the end of the result pipe, or the deadline.

    Returns True when the deadline passed first. The output pipe may stay open
    after the child ends (a process the learner started holds it): it is read
    along the way, never waited for.
    """
    selector = selectors.DefaultSelector()
    selector.register(launched.result_read, selectors.EVENT_READ, "result")
    selector.register(launched.output_read, selectors.EVENT_READ, "output")
    pending = b""
    result_open = True
    try:
        while result_open and not collected.done:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return True
            for key, _ in selector.select(timeout=remaining):
                chunk = os.read(key.fd, 65536)
                if key.data == "output":
                    if not chunk:
                        selector.unregister(key.fd)
                    collected.output = (collected.output + chunk.decode("utf-8", "replace"))[
                        -OUTPUT_TAIL * 4 :
                    ]
                    continue
                if not chunk:
                    result_open = False
                    break
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    message = _parse(line, token)
                    if message is not None:
                        _handle(message, collected)
        _drain_output(selector, launched.output_read, collected)
    finally:
        selector.close()
    return False


def _drain_output(selector: selectors.BaseSelector, output_fd: int, collected: _Collected) -> None:
    """Whatever output is already waiting, without blocking (a process the learner
    started may hold the pipe open forever)."""
    if output_fd not in selector.get_map():
        return
    for _ in range(64):
        ready = [key.fd for key, _ in selector.select(timeout=0)]
        if output_fd not in ready:
            return
        chunk = os.read(output_fd, 65536)
        if not chunk:
            return
        collected.output = (collected.output + chunk.decode("utf-8", "replace"))[-OUTPUT_TAIL * 4 :]


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
    stopped = False
    for stage in collected.stage_ids:
        if stage in collected.stages:
            stages.append(collected.stages[stage])
            continue
        if stopped or collected.done:
            stages.append(StageResult(stage, Verdict.SKIP, "skipped: the check stopped"))
            continue
        # The first stage without a result is the one that was running.
        if timed_out:
            message = (
                f"timed out after {timeout:g} s during {STAGE_TITLES[stage].lower()}: "
                "an endless loop? (raise the limit with --timeout)"
            )
        else:
            how = _exit_description(returncode) if returncode is not None else "ended"
            message = f"the checking process {how} during {STAGE_TITLES[stage].lower()}"
        stages.append(StageResult(stage, Verdict.FAIL, message))
        stopped = True
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
