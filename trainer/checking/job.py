"""One check, as the command line hands it to the checking server and its checker.

A job travels once, as JSON, from the CLI's process to the server, which forks a
checker for it; both sides are ours (the learner's process never sees a job: it
gets only :class:`~trainer.checking.protocol.Load`'s few facts). No torch here: the
CLI builds jobs without importing it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Job:
    exercise: dict[str, Any]  # the spec as the CLI validated it: never read from disk again
    spec_path: str
    spec_name: str  # how to name the spec in a message
    file: str  # the learner's file, resolved
    source: str  # its text, as read once by the CLI
    seed: int
    token: str  # stamps every result frame: only this job's checker knows it
    output_mark: str  # marks the stages in the output: the learner's process never holds it
    solution: str | None = None  # the reference solution, for advice (saved bytes)
    double_backward: bool = False
    memory_limit_mb: int | None = None
    stop_after_failure: bool = False
    # Whether more checks follow on this server (a service that checks again: watch,
    # grade, validate). Then the server keeps the exercise's plan for them, and the
    # zygote makes the next learner process ahead. A single check's checker works its
    # plan out itself (the server, the largest process, never holds one), and no
    # process is made for a check that will not come.
    more_checks: bool = True
    # The stages to run besides load, by id; empty: every stage of the exercise.
    only_stages: list[str] = field(default_factory=list)
    draw_always: bool = False
    # A second learner process for some stages (trusted/ahead.py): None, when the check
    # runs alone and two CPUs are free; False, never; True, whenever there are two CPUs.
    second_process: bool | None = None
    confine: dict[str, Any] = field(default_factory=dict)  # host protection's settings
    # One of the catalogue's own files (validate): as trusted as the checker, so the
    # checker may go on to the next such check of the exercise (see server._Pool).
    catalogue_file: bool = False

    def to_wire(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_wire(cls, data: object) -> Job:
        """The job a frame holds; ValueError when it is not one (a frame is ours, so this
        is a bug of ours, never the learner's)."""
        if not isinstance(data, dict):
            raise ValueError("a job is not an object")
        names = {f.name for f in dataclasses.fields(cls)}
        if not names >= set(data) or not {"exercise", "file", "source", "token"} <= set(data):
            raise ValueError(f"a job's fields are {sorted(data)}, not {sorted(names)}")
        return cls(**data)

    @property
    def plan_key(self) -> tuple[str, int]:
        """What a plan depends on: the spec and the seed. Not which follow-up is active:
        what a follow-up changes in the plan (a wider domain, second derivatives) it
        writes into the spec's own fields (``Exercise.with_follow_up``)."""
        import hashlib
        import json

        spec = json.dumps(
            {k: v for k, v in self.exercise.items() if k != "active_follow_up"}, sort_keys=True
        )
        return hashlib.sha256(spec.encode()).hexdigest(), self.seed
