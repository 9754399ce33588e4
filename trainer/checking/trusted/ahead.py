"""Stages run ahead, in a second learner process, while the first runs the others.

A check is a conversation with one learner process: the checker asks, the process
answers, one waits while the other works, so a check uses one CPU. On a machine with
a second one, a check on its own asks the zygote for a second process of the same
file, forked and sealed as the first, and runs :data:`AHEAD` there on a thread of its
own from the start, while the first process runs the other stages. Every stage is
still reported in its turn; while the first process would wait for a stage run
ahead, it runs its own next stages early (``stages.run_stages``), and one of them
that reads the verdict of a stage run ahead gets it from there
(:class:`VerdictsSoFar`). The stages run ahead need nothing the stages before them
leave in the learner's process, only the file loaded (as follow-up checks, which
run a few stages after load, show), nor their verdicts.

Only a check on its own gains: the CLI says whether other checks of its run (then
every CPU is busy already), a run that stops at its first failure does not start
one (its later stages rarely run), a machine with one CPU never does, and the
checker must claim two CPUs that no other check of this user holds
(``processes.claim_a_cpu``: a lock file per CPU, across services and processes).

The second process is watched as the first is: its derivation watch sees its import
and every call it answers, and "Derived by hand" reports what either watch saw
(:meth:`StagesAhead.by_hand`); what it prints is shown under the stage that printed
it; its patches of torch fail that stage. When it cannot be used (it did not start,
its file did not load, its protection is not the first process's), each stage runs
in its turn in the first process, as it always did.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from trainer.checking import transport
from trainer.checking.report import Verdict
from trainer.checking.trusted.proxy import Sandbox, proxy_function
from trainer.checking.trusted.stages import (
    ELSEWHERE,
    FAIL,
    Checked,
    StageOutcome,
    guarded,
    output_mark,
)

# The stages a second process runs, in the order they are reported: they need nothing
# of the stages before them. With them out of the way the first process runs load,
# forward and the 500 calls of "Calls as in training", about as long.
AHEAD = ("backward", "contract", "stability", "gradcheck")
# Stages the first process never runs before their turn: they must see every other
# stage end first ("Derived by hand" reports what both watches saw in all of them).
LAST = ("by_hand",)
# What is kept of the second process's output (the CLI caps what it shows, too).
KEPT_OUTPUT = 1 << 20


def stages_ahead(
    stop_after_failure: bool, alone: bool, stages: Sequence[str], wanted: bool | None = None
) -> list[str]:
    """The stages of ``stages`` a second process should run ahead (none: not worth it).
    ``wanted``: the job's ``second_process`` (True: even when not alone; False: never).
    Asked before this process is pinned to one CPU."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    if wanted is False or not (alone or wanted) or stop_after_failure or cpus < 2:
        return []
    return [stage for stage in stages if stage in AHEAD]


class _NoVerdicts(dict[str, Verdict]):
    """What a stage run ahead sees of the verdicts of the stages before it: nothing. It
    runs before they end; a stage that reads one cannot be run ahead (a bug of ours,
    said as such, never a verdict read from a check half done)."""

    def get(self, key: str, default: Verdict | None = None) -> Verdict | None:  # type: ignore[override]
        raise RuntimeError(f"a stage run ahead read the verdict of {key}")

    def __getitem__(self, key: str) -> Verdict:
        raise RuntimeError(f"a stage run ahead read the verdict of {key}")


class VerdictsSoFar(dict[str, Verdict]):
    """The first process's ``Checked.verdicts``: a stage run ahead whose turn has not
    come yet (a stage the first process runs early reads it) has its verdict from
    there, waited for."""

    def __init__(self) -> None:
        super().__init__()
        self.ahead: StagesAhead | None = None

    def get(self, key: str, default: Verdict | None = None) -> Verdict | None:  # type: ignore[override]
        if key not in self and self.ahead is not None:
            found = self.ahead.verdict(key)
            if found is not None:
                return found
        return super().get(key, default)


@dataclasses.dataclass
class _Done:
    outcome: StageOutcome
    printed: tuple[int, int]  # what the process printed during the stage: from, to
    runs: list[tuple[str, int]]  # where each of its runs began in it: label, from
    ended: str | None  # how the process ended during the stage, if it did


class StagesAhead:
    """``stages`` run in ``sandbox`` (a second learner process of the file), on a thread
    of their own from now on; ``output`` is the read end of what that process prints;
    ``bodies`` the stages' bodies by id: stages that read no earlier stage's verdict;
    ``started`` says that one starts there (a timeout is then said of the first stage
    started and not ended, in either process)."""

    def __init__(
        self,
        checked: Checked,
        sandbox: Sandbox,
        output: int,
        bodies: dict[str, Callable[[Checked], StageOutcome]],
        started: Callable[[str], None] = lambda stage: None,
    ) -> None:
        self.stages = tuple(bodies)
        self._sandbox = sandbox
        self._checked = dataclasses.replace(
            checked,
            function_class=proxy_function(sandbox, checked.exercise),
            sandbox=sandbox,
            verdicts=_NoVerdicts(),
        )
        self._bodies = bodies
        self._started = started
        self._done: dict[str, _Done] = {}
        self._finished = threading.Event()  # every stage run, or given up
        self._changed = threading.Condition()
        self._by_hand: StageOutcome | None = None
        self._error: BaseException | None = None
        # What it prints is read by the thread, as it waits for each reply and once
        # the reply has come (the process flushes its output before it replies): all
        # a call printed is read before the next call, to the byte.
        self._output = output
        os.set_blocking(output, False)
        sandbox.also_read(output, self._read)
        self._printed = bytearray()  # the first KEPT_OUTPUT bytes it printed
        self._seen = 0  # bytes it printed, kept or not
        self._running = threading.Thread(target=self._run, name="stages ahead", daemon=True)
        self._running.start()

    # -- the thread ---------------------------------------------------------------------

    def _run(self) -> None:
        from trainer.checking.trusted.by_hand import by_hand_stage

        sandbox = self._sandbox
        runs: list[tuple[str, int]] = []
        ELSEWHERE.sink = lambda label: runs.append((label, self._printed_so_far()))
        try:
            if not sandbox.alive or sandbox.load().problem is not None:
                return  # the first process says why, in the load stage
            sandbox.reset()
            for stage, body in self._bodies.items():
                self._started(stage)
                start, started = self._printed_so_far(), time.monotonic()
                runs = []
                outcome = guarded(sandbox, functools.partial(body, self._checked))
                outcome.seconds = time.monotonic() - started
                with self._changed:
                    printed = (start, self._printed_so_far())
                    ended = None if sandbox.alive else sandbox.ended
                    self._done[stage] = _Done(outcome, printed, runs, ended)
                    self._changed.notify_all()
                if sandbox.alive:
                    sandbox.reset()
            if sandbox.alive:
                self._by_hand = guarded(sandbox, functools.partial(by_hand_stage, self._checked))
        except BaseException as error:  # a bug of ours: said in the next stage's turn
            self._error = error
        finally:
            with contextlib.suppress(Exception):
                sandbox.stop()
            self._read()
            with contextlib.suppress(OSError):
                os.close(self._output)
            with self._changed:
                self._finished.set()
                self._changed.notify_all()

    def _printed_so_far(self) -> int:
        """The bytes the process has printed until now (its last reply is in: all it
        printed before it is in the pipe)."""
        self._read()
        return self._seen

    def _read(self) -> bool:
        """Read what is in the pipe now, without waiting; False at its end."""
        while True:
            try:
                chunk = os.read(self._output, 1 << 16)
            except BlockingIOError:
                return True
            except OSError:
                return False
            if not chunk:
                return False
            room = max(0, KEPT_OUTPUT - len(self._printed))
            self._printed += chunk[:room]
            self._seen += len(chunk)

    # -- the stages' turns ----------------------------------------------------------------

    def outcome(self, stage: str, first: Sandbox) -> StageOutcome | None:
        """``stage``'s outcome, once run there (None: it could not run there; run it
        here, in ``first``). What the process printed during it is written to this
        process's output now, after the stage's mark."""
        with self._changed:
            self._changed.wait_for(lambda: self.ready(stage))
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        done = self._done.get(stage)
        if done is None or _level(self._sandbox.protection) != _level(first.protection):
            return None
        start, end = done.printed
        shown = bytearray()
        for label, begins in done.runs:  # each run's mark where the run began
            shown += self._printed[start:begins] + output_mark(stage, label)
            start = begins
        shown += self._printed[start:end]
        if end > KEPT_OUTPUT:
            shown += f"\n[{end - max(done.printed[0], KEPT_OUTPUT):,} more bytes printed: cut]\n".encode()
        with contextlib.suppress(OSError):
            transport.write_all(1, bytes(shown))
        return done.outcome

    def ended_in(self, stage: str) -> str | None:
        """How the process ended during ``stage``, if it did (then, as with one process,
        the stages after it cannot run)."""
        done = self._done.get(stage)
        return done.ended if done is not None else None

    def verdict(self, stage: str) -> Verdict | None:
        """``stage``'s verdict there, once run (None: not run there)."""
        if stage not in self.stages:
            return None
        with self._changed:
            self._changed.wait_for(lambda: self.ready(stage))
        done = self._done.get(stage)
        return done.outcome.verdict if done is not None else None

    def may_run_early(self, stage: str) -> bool:
        """Whether the first process may run ``stage`` while it waits for one of these."""
        return stage not in self.stages and stage not in LAST

    def ready(self, stage: str) -> bool:
        """Whether ``stage`` is run there, or will not be."""
        return stage in self._done or self._finished.is_set()

    def by_hand(self) -> StageOutcome | None:
        """What the second process's derivation watch saw, when it saw something (the
        file's import and every call it answered): a failure of "Derived by hand"."""
        self._finished.wait()
        found = self._by_hand
        return found if found is not None and found.verdict == FAIL else None

    def abandon(self) -> None:
        """The stages left will not run (an earlier failure blocked them): end the
        process; the thread's call returns as if it had ended."""
        self._sandbox.hang_up()
        self._finished.wait(timeout=5.0)


def _level(protection: Any) -> tuple[object, object]:
    """What makes two processes' protection the same: its level and what is missing."""
    found = protection if isinstance(protection, dict) else {}
    return found.get("level"), sorted(found.get("missing") or {})
