"""The checking child: imports torch, runs the learner's code, reports over a private pipe.

Started by :mod:`trainer.checking.runner` as ``python -m trainer.checking.child``.
The job arrives as JSON on stdin; results leave as JSON lines on a pipe whose
descriptor only this module knows, each stamped with a token from the parent,
so nothing the learner prints or writes to stdout can pose as a verdict.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Kept before any learner code runs.
_write = os.write
_dumps = json.dumps
_exit = os._exit
_monotonic = time.monotonic


class Channel:
    def __init__(self, fd: int, token: str) -> None:
        # Move the pipe away from the number the parent chose, so it is not
        # where a learner would look for it.
        self._fd = os.dup(fd)
        os.close(fd)
        self._token = token

    def send(self, **message: Any) -> None:
        data = (_dumps({**message, "token": self._token}) + "\n").encode()
        while data:
            written = _write(self._fd, data)
            data = data[written:]


def _read_job() -> dict[str, Any]:
    job: dict[str, Any] = json.loads(sys.stdin.read())
    # The learner's input() gets end-of-file at once instead of waiting forever.
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    return job


def main() -> None:
    job = _read_job()
    channel = Channel(int(job["result_fd"]), str(job["token"]))

    import torch

    from trainer.checking.guard import NamespaceGuard
    from trainer.checking.learner import LearnerProblem, find_function_class, import_source
    from trainer.checking.plan import build_plan
    from trainer.checking.stages import (
        StageOutcome,
        backward_stage,
        forward_stage,
        gradcheck_stage,
    )
    from trainer.spec import load_exercise

    torch.set_num_threads(1)  # tiny tensors: threads cost more than they save
    exercise = load_exercise(Path(job["spec_path"]), job["spec_name"])
    path = Path(job["file"])
    try:
        plan = build_plan(exercise, int(job["seed"]))
    except Exception as error:  # a broken reference is the spec's fault, not the learner's
        channel.send(type="error", message=f"{job['spec_name']}: reference: {error}")
        _exit(0)
    channel.send(type="ready")

    guard = NamespaceGuard.for_checker([torch.Tensor, torch.autograd.Function])

    def run_stage(stage: str, body: Callable[[], StageOutcome]) -> bool:
        channel.send(type="stage-start", stage=stage)
        started = _monotonic()
        try:
            outcome = body()
        except LearnerProblem as problem:
            outcome = StageOutcome(False, problem.message, problem.details)
        patched = guard.restore()
        if patched:
            shown = ", ".join(f"`{name}`" for name in patched[:5])
            outcome = StageOutcome(
                False,
                f"your code replaced {shown}. The checker restored the original; "
                "a solution must not patch torch or the checker.",
            )
        channel.send(
            type="stage-end",
            stage=stage,
            passed=outcome.passed,
            message=outcome.message,
            details=outcome.details,
            seconds=round(_monotonic() - started, 4),
        )
        return outcome.passed

    loaded: list[Any] = []

    def load() -> StageOutcome:
        module = import_source(job["source"], path)
        solution = find_function_class(module, exercise, path)
        loaded.append(solution.function_class)
        return StageOutcome(True, f"`{exercise.class_name}` found with static forward and backward")

    if run_stage("load", load) and loaded:
        function_class = loaded[0]
        for stage, check in (
            ("forward", forward_stage),
            ("backward", backward_stage),
            ("gradcheck", gradcheck_stage),
        ):
            run_stage(stage, functools.partial(check, function_class, plan, exercise, path))
    channel.send(type="done")
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter shutdown: atexit hooks and threads of the learner's code
    # must not run after the verdict.
    _exit(0)


if __name__ == "__main__":
    main()
