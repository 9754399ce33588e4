"""The checking process: computes every reference and verdict; the learner's code runs elsewhere.

Started by :mod:`trainer.checking.runner` as ``python -m trainer.checking.child``.
It reads the job, imports torch, computes inputs and references, then forks
the learner's process (:mod:`trainer.checking.sandbox`) and only after that
reads the token that stamps its results: the learner's process never holds
the token nor the result pipe. Stages run here, on the learner's answers.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Kept before anything else runs.
_write = os.write
_dumps = json.dumps
_monotonic = time.monotonic


class Channel:
    def __init__(self, fd: int, token: str) -> None:
        self._fd = fd
        self._token = token

    def send(self, **message: Any) -> None:
        data = (_dumps({**message, "token": self._token}) + "\n").encode()
        while data:
            written = _write(self._fd, data)
            data = data[written:]


def _read_line(fd: int) -> bytes:
    """One line from ``fd``, read byte by byte so nothing after it is buffered here."""
    line = bytearray()
    while True:
        byte = os.read(fd, 1)
        if not byte or byte == b"\n":
            return bytes(line)
        line += byte


def _read_exact(fd: int, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = os.read(fd, size - len(data))
        if not chunk:
            break
        data += chunk
    return bytes(data)


def main() -> None:
    """Cold start: the job comes on stdin as "<length>\n<json>", the token after it."""
    size = int(_read_line(0))
    job: dict[str, Any] = json.loads(_read_exact(0, size))
    run(job, token_fd=0, result_fd=int(job["result_fd"]))


def run(job: dict[str, Any], token_fd: int, result_fd: int, plan: Any = None) -> None:
    """Check one file and exit. The token is read from ``token_fd`` only once the
    learner's process exists, so that process never holds it; never returns.

    ``plan`` is the precomputed plan a warm parent may hand over (see zygote).
    """
    import torch

    from trainer.checking.plan import build_plan, reference_saved_bytes
    from trainer.checking.proxy import Sandbox, proxy_function
    from trainer.checking.stages import Checked, StageOutcome, run_stages, stage_ids
    from trainer.spec import load_exercise

    torch.set_num_threads(1)  # tiny tensors: threads cost more than they save
    exercise = load_exercise(Path(job["spec_path"]), job["spec_name"])
    path = Path(job["file"])
    try:
        if plan is None:
            plan = build_plan(exercise, int(job["seed"]))
    except Exception as error:  # a broken reference is the spec's fault, not the learner's
        token = _read_line(token_fd).decode().strip()
        Channel(result_fd, token).send(
            type="error",
            message=f"{job['spec_name']}: preparing the check failed (reference, cases or "
            f"stability probes): {error}",
        )
        os._exit(0)

    sandbox = Sandbox.start(exercise, job["source"], path, close_in_child=[result_fd, token_fd])
    token = _read_line(token_fd).decode().strip()
    channel = Channel(result_fd, token)
    double_backward = bool(job.get("double_backward"))
    channel.send(type="ready", stages=stage_ids(exercise, double_backward))

    def report(stage: str, body: Callable[[], StageOutcome]) -> StageOutcome:
        channel.send(type="stage-start", stage=stage)
        started = _monotonic()
        try:
            outcome = body()
        except Exception:  # a bug of ours: say so, never blame the learner
            channel.send(type="error", message="the checker failed:\n" + traceback.format_exc())
            sandbox.stop()
            os._exit(0)
        channel.send(
            type="stage-end",
            stage=stage,
            verdict=outcome.verdict,
            message=outcome.message,
            details=outcome.details,
            diagnosis=outcome.diagnosis,
            notes=outcome.notes,
            seconds=round(_monotonic() - started, 4),
        )
        return outcome

    checked = Checked(
        function_class=proxy_function(sandbox, exercise),
        plan=plan,
        exercise=exercise,
        path=path,
        sandbox=sandbox,
        reference_saved=reference_saved_bytes(exercise, plan, job.get("solution")),
        double_backward=double_backward,
    )
    run_stages(checked, report)
    sandbox.stop()
    channel.send(type="done")
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(0)


if __name__ == "__main__":
    main()
