"""One check, in a process of its own: plan, learner process, stages, results.

Forked by the server (:mod:`trainer.checking.server`) for each job. It holds the
plan (inputs, references, expected gradients), asks the learner zygote for a
fresh learner process, runs the stages on that process's answers, and reports
on the result pipe. The learner's process never holds the result pipe nor the
token that stamps each result frame.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import json
import os
import socket
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainer.checking import transport
from trainer.checking.job import Job
from trainer.checking.report import StageResult
from trainer.spec import Exercise, exercise_from_mapping
from trainer.vocabulary import STAGE_BY_ID, STAGES, selected, stages_for


class Channel:
    """Result frames to the CLI, each stamped with the job's token."""

    def __init__(self, fd: int, token: str) -> None:
        self._fd = fd
        self._token = token
        self._lock = threading.Lock()  # a second thread runs stages ahead (ahead.py)

    def send(self, **message: Any) -> None:
        with self._lock:
            transport.send(self._fd, {**message, "token": self._token})


def warm_up() -> None:
    """Import every stage's module once, in the server (forks inherit them)."""
    # torch.autograd.grad with explicit grad_outputs (gradcheck uses it) imports this
    # on first use: 0.5 s that every forked checker would pay again.
    import torch.fx.experimental.symbolic_shapes  # noqa: F401

    # A failing stage draws its picture: most checks of a wrong file need these.
    import trainer.checking.trusted.pictures  # noqa: F401

    # Every check imports it in run (~2 ms, dataclasses made): once here instead.
    from trainer.checking.trusted import ahead  # noqa: F401
    from trainer.checking.trusted.stages import stage_body

    for stage in STAGES:
        stage_body(stage)


def warm_up_for(job: Job) -> None:
    """Import, once in the server, what this exercise's stages import on first use, so
    that its checkers (forks of the server) do not each pay it. Too slow for
    :func:`warm_up`, which every server runs, checking any exercise."""
    stages = stages_for(job_exercise(job), job.double_backward)
    for module in sorted({m for stage in stages for m in stage.checker_imports}):
        importlib.import_module(module)


# Exercises read from the jobs' specs, by the spec as sent: the server reads each once
# (:func:`remember_exercise`) and every checker, its fork, finds it read (~3 ms a check).
_EXERCISES: dict[str, Exercise] = {}
EXERCISES_KEPT = 8


def job_exercise(job: Job) -> Exercise:
    """The spec the CLI validated, as it sent it: never read again from disk."""
    key = json.dumps([job.spec_name, job.spec_path, job.exercise], sort_keys=True)
    found = _EXERCISES.get(key)
    if found is None:
        source = Path(job.spec_path) if job.spec_path else None
        found = exercise_from_mapping(job.exercise, job.spec_name, source)
        while len(_EXERCISES) >= EXERCISES_KEPT:
            del _EXERCISES[next(iter(_EXERCISES))]
        _EXERCISES[key] = found
    return found


def remember_exercise(job: Job) -> None:
    """In the server, before forking a job's checker: read its spec, once per spec. A
    spec that does not read is left to the checker, which reports it."""
    with contextlib.suppress(Exception):
        job_exercise(job)


def build_job_plan(job: Job) -> Any:
    from trainer.checking.trusted.plan import build_plan

    return build_plan(job_exercise(job), job.seed)


def run(
    job: Job,
    result_fd: int,
    zygote: socket.socket,
    plan: Any = None,
    reference_saved: dict[str, int] | None = None,
    alone: bool = False,
) -> None:
    """Check one file; the caller exits the process afterwards. ``plan`` and
    ``reference_saved``, when given, were worked out for this job by the server;
    ``alone``: no other check runs beside this one (see :mod:`ahead`)."""
    from trainer.checking.trusted import ahead
    from trainer.checking.trusted.plan import reference_saved_bytes
    from trainer.checking.trusted.proxy import LearnerSideBug, Sandbox, proxy_function
    from trainer.checking.trusted.stages import (
        Checked,
        StageOutcome,
        mark_output,
        run_stages,
        stage_body,
    )

    channel = Channel(result_fd, job.token)
    try:
        exercise = job_exercise(job)
        if plan is None:
            plan = build_job_plan(job)
    except Exception as error:  # a broken reference is the spec's fault, not the learner's
        channel.send(
            type="error",
            message=f"{job.spec_name}: preparing the check failed (reference, cases or "
            f"stability probes): {error}",
        )
        return

    path = Path(job.file)
    double_backward = job.double_backward
    stages_to_run = selected(stages_for(exercise, double_backward), job.only_stages)
    start = functools.partial(
        Sandbox.start,
        zygote,
        exercise,
        source=job.source,
        path=path,
        memory_limit_mb=job.memory_limit_mb,
        confine=job.confine,
        imports=sorted({m for stage in stages_to_run for m in stage.learner_imports}),
        more=job.more_checks,
    )
    # Before this process is pinned to one CPU: whether a second one is there.
    ids = [stage.id for stage in stages_to_run]
    split = ahead.stages_ahead(job.stop_after_failure, alone, ids, job.second_process)
    sandbox = start()
    if sandbox.pid:
        from trainer.checking import processes

        # A conversation on one CPU; two CPUs no other check (of any service) runs on
        # for a check with a second process, unpinned: the two conversations share them.
        claimed = [processes.claim_a_cpu() for _ in range(2 if split else 1)]
        cpus = [cpu for cpu in claimed if cpu is not None]
        if len(cpus) < 2 and job.second_process is not True:
            split = []
            if cpus:
                processes.pin(cpus[0], [sandbox.pid])
        channel.send(type="learner", pid=sandbox.pid)
    second: tuple[Sandbox, int] | None = None
    if split:
        read, write = os.pipe()
        second = start(output=write, second=True), read
        os.close(write)
        if second[0].pid:
            channel.send(type="learner", pid=second[0].pid)
    channel.send(type="ready", stages=ids)

    from trainer.checking.trusted import stages

    stages._OUTPUT["mark"] = job.output_mark

    def report(stage: str, body: Callable[[], StageOutcome]) -> StageOutcome:
        mark_output(stage=stage)  # what the learner's code prints now belongs to this stage
        channel.send(type="stage-start", stage=stage)
        started = time.monotonic()
        try:
            outcome = body()
        except Exception as error:  # a bug of ours: said as such, never the learner's failure
            where = f"the stage {STAGE_BY_ID[stage].title}"
            if isinstance(error, LearnerSideBug):
                where = f"the learner process's handler of `{error.op}`, during {where}"
            channel.send(type="bug", where=where, traceback=traceback.format_exc())
            sandbox.stop()
            raise SystemExit(0) from None
        result = StageResult(
            id=stage,
            verdict=outcome.verdict,
            message=outcome.message,
            details=outcome.details,
            seconds=round(
                time.monotonic() - started if outcome.seconds is None else outcome.seconds, 4
            ),
            diagnosis=outcome.diagnosis.to_dict() if outcome.diagnosis else None,
            pictures=outcome.pictures,
            case=outcome.case,
            same_as=outcome.same_as,
            first_wrong=outcome.first_wrong,
        )
        channel.send(type="stage-end", result=result.to_dict(), notes=outcome.notes)
        if stage == "load":  # host protection (issue 16): what the learner's process ran under
            channel.send(type="protection", level=sandbox.protection)
        return outcome

    verdicts = ahead.VerdictsSoFar()
    checked = Checked(
        function_class=proxy_function(sandbox, exercise),
        plan=plan,
        exercise=exercise,
        path=path,
        sandbox=sandbox,
        reference_saved=reference_saved
        if reference_saved is not None
        else reference_saved_bytes(exercise, plan, job.solution),
        double_backward=double_backward,
        stop_after_failure=job.stop_after_failure,
        only_stages=frozenset(job.only_stages),
        draw_always=job.draw_always,
        verdicts=verdicts,
    )
    early = None
    if second is not None:
        bodies = {stage: stage_body(STAGE_BY_ID[stage]) for stage in split}
        early = ahead.StagesAhead(
            checked,
            *second,
            bodies,
            started=lambda stage: channel.send(type="stage-start", stage=stage),
        )
        verdicts.ahead = early
        checked.also_watched = early.by_hand

    def announce(stage: str) -> None:  # a stage run before its turn starts now
        mark_output(stage=stage)
        channel.send(type="stage-start", stage=stage)

    run_stages(checked, report, early, announce)
    sandbox.stop()  # first: when the CLI has the verdict, nothing of the check is left
    channel.send(type="done")
