"""Run checks and collect their verdicts (the CLI's side: no torch here).

Every check, cold or warm, takes the same path: a :class:`CheckingService`
(the checking server, :mod:`trainer.checking.server`) gets one control frame
per job, with the job pipe, the result pipe and the output pipe. A cold check
is a service started for one job; watch mode, grading and validation keep one
service for many. A pass needs a ``done`` frame stamped with the job's token:
a crash, a hang, ``sys.exit`` or printed fake results all end up as failures
of the stage that was running. A bug of ours (a ``bug`` frame from the checker,
a ``bug`` header from the server, or an exception in this module) ends up as
the report's :class:`~trainer.checking.report.CheckerBug`, never as a failing
stage: its traceback is written to a file (:mod:`trainer.bugs`).
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import math
import os
import secrets
import selectors
import socket
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from traceback import format_exc
from typing import IO, Any

import trainer
from trainer.bugs import CheckerBugError, last_line, write_bug_report
from trainer.checking import processes, transport
from trainer.checking.feedback import DEFAULT_FEEDBACK, with_feedback
from trainer.checking.job import Job
from trainer.checking.limits import (
    DEFAULT_MEMORY_LIMIT_MB,
    DEFAULT_SCRATCH_MB,
    DEFAULT_SEED,
    DEFAULT_TIMEOUT,
)
from trainer.checking.report import (
    REQUIRED_STAGES,
    CheckerBug,
    CheckReport,
    ProtectionLevel,
    StageResult,
    Verdict,
)
from trainer.checking.spawn import end_server, meanwhile, spawn_server, take_early
from trainer.checking.wording import OUTPUT_MARK
from trainer.errors import TrainerError
from trainer.spec import Exercise
from trainer.vocabulary import STAGE_BY_ID, stages_for

OUTPUT_TAIL = 4000  # characters of the learner's printed output kept for the report
OUTPUT_LINE_LIMIT = 4 * OUTPUT_TAIL  # characters of one unfinished line kept while it grows
# Bytes of the learner's output written to the output file when one is asked for
# (`check --show-output`): all of it, from the first line, up to this much of disk.
OUTPUT_FILE_LIMIT = 256 * 2**20
READY_TIMEOUT = 120.0
# A check whose server died under it (not the learner's doing: the learner's process
# cannot reach the server) is run again on a fresh server, this many times at most.
SERVER_RETRIES = 2


@dataclass(frozen=True)
class HostLimits:
    """Host protection's limits for the learner's process (see ``learner/confine``).

    ``skip`` leaves protections out by name: only to measure their cost or to prove
    that a test fails without them.
    """

    cpu_seconds: int | None = None  # None: the check's timeout, rounded up
    scratch_mb: int = DEFAULT_SCRATCH_MB
    skip: tuple[str, ...] = ()

    def for_job(self, timeout: float, hide: Sequence[Path] = ()) -> dict[str, Any]:
        """The spawn header's settings; ``hide``: the exercise's folders to cover."""
        cpu = self.cpu_seconds if self.cpu_seconds is not None else max(1, math.ceil(timeout))
        return {
            "cpu_seconds": cpu,
            "scratch_mb": self.scratch_mb,
            "hide": [str(h) for h in hide],
            "skip": list(self.skip),
        }


class ServerStopped(TrainerError):
    """The checking server stopped before it could start a check (it is started again)."""


@dataclass
class Launched:
    """A running check: the checker's pid and the pipes to read."""

    pid: int
    result_read: int
    output_read: int
    generation: int = 0  # of the server that runs it


class CheckingService:
    """The checking server: torch imported once, every check a fork of it.

    Use as a context manager. Thread-safe: grading launches from several threads.
    A server that stopped (killed, say) is started again for the next check.
    """

    def __init__(self, ready_timeout: float = READY_TIMEOUT) -> None:
        self._ready_timeout = ready_timeout
        self._lock = threading.Lock()
        self._changed = threading.Condition()
        self._process: subprocess.Popen[bytes] | None = None
        self._socket: socket.socket | None = None
        self._pids: list[int] = []
        self._in_flight = 0  # checks launched and not yet over
        self._exits: dict[int, int] = {}
        self._gone = True
        self._errors: IO[bytes] | None = None
        self._bug: str | None = None  # the traceback of a bug of the server's, as it sent it
        self.generation = 0  # how many servers this service has started
        self._start()

    def _start(self) -> None:
        if self._socket is not None:  # a server that stopped: its socket goes with it
            self._socket.close()
            self._socket = None
        if self._process is not None:
            end_server(self._process)
            self._process = None
        # The server the command started first thing (trainer.launch), else a new one.
        spawned = (take_early() if self.generation == 0 else None) or spawn_server()
        if self._errors is not None:
            self._errors.close()
        # Where the server's own errors go (torch missing, say); read on failure.
        self._errors = errors = spawned.errors
        process, ours = spawned.process, spawned.socket
        self._process, self._socket = process, ours
        self._pids, self._exits, self._ready, self._gone = [], {}, False, False
        self._bug = None
        self.generation += 1
        threading.Thread(target=self._read, args=(ours,), daemon=True).start()
        meanwhile()  # the CLI's own preparations, while the server imports torch
        with self._changed:
            self._changed.wait_for(lambda: self._ready or self._gone, timeout=self._ready_timeout)
        if not self._ready and self._bug is not None:
            bug = self._bug
            self.close()
            raise CheckerBugError("the checking server", bug)
        if not self._ready:
            errors.seek(0)
            tail = errors.read().decode("utf-8", "replace").strip()[-1500:]
            self.close()
            raise TrainerError(
                "the checking process could not start (is torch installed in this environment?)"
                + (f"\n{tail}" if tail else "")
            )

    def _read(self, sock: socket.socket) -> None:
        while True:
            try:
                header, _ = transport.receive_with_fds(sock, 0)
            except (OSError, transport.WireError):
                header = None
            with self._changed:
                if header is None:
                    if sock is self._socket:
                        self._gone = True
                    self._changed.notify_all()
                    return
                if header.get("ready"):
                    self._ready = True
                elif "bug" in header:
                    self._bug = str(header["bug"])
                elif "pid" in header:
                    self._pids.append(int(header["pid"]))
                elif "exit" in header:
                    self._exits[int(header["exit"])] = int(header["code"])
                self._changed.notify_all()

    def died_since(self, generation: int, wait: float) -> bool:
        """Whether the server that started with ``generation`` has stopped, waiting up to
        ``wait`` s for word of it (a check that ended without its last frame)."""
        with self._changed:
            self._changed.wait_for(
                lambda: self._gone or self.generation != generation, timeout=wait
            )
            return self._gone or self.generation != generation

    def launch(self, job: Job) -> Launched:
        """Start one check of ``job``; the caller reads the pipes and closes them."""
        result_read, result_write = os.pipe()
        output_read, output_write = os.pipe()
        job_read, job_write = os.pipe()
        try:
            with self._lock:
                if self._gone:
                    self._start()
                generation = self.generation
                assert self._socket is not None
                # Alone: no other check of this service runs (a checker may then use a
                # second CPU, see trusted/ahead.py).
                alone = self._in_flight == 0
                with self._changed:
                    transport.send_with_fds(
                        self._socket,
                        {"op": "check", "alone": alone},
                        [job_read, result_write, output_write],
                    )
                os.close(job_read)
                job_read = -1
                transport.send(job_write, job.to_wire())
                os.close(job_write)
                job_write = -1
                with self._changed:
                    self._changed.wait_for(lambda: bool(self._pids) or self._gone, timeout=30)
                    pid = self._pids.pop(0) if self._pids else 0
                self._in_flight += pid > 0
        except OSError as error:
            pid, reason, generation = 0, error.strerror or str(error), 0
        else:
            reason = "it stopped"
        finally:
            for fd in (job_read, job_write, result_write, output_write):
                if fd >= 0:
                    os.close(fd)
        if pid <= 0:
            os.close(result_read)
            os.close(output_read)
            if self._bug is not None:  # the server stopped on a bug of its own (said first)
                raise CheckerBugError("the checking server", self._bug)
            raise ServerStopped(f"the checking process could not start a check ({reason}).")
        return Launched(pid, result_read, output_read, generation)

    def landed(self) -> None:
        """A check :meth:`launch` started is over (its pipes read, its processes gone)."""
        with self._lock:
            self._in_flight -= 1

    def exit_code(self, pid: int, wait: float) -> int | None:
        """The checker's exit code (negative: killed by that signal), waiting up to ``wait`` s."""
        with self._changed:
            self._changed.wait_for(lambda: pid in self._exits or self._gone, timeout=wait)
            return self._exits.pop(pid, None)

    def close(self, wait: bool = True) -> None:
        """Stop the server; it ends every checker and learner process first. Without
        ``wait``, return as soon as it is told: it ends while the caller goes on (a
        single check's report is drawn meanwhile), and this process waits for it
        before it exits."""
        sock, process = self._socket, self._process
        self._socket, self._process = None, None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        if process is not None:
            if wait:
                end_server(process, grace=10)
            else:
                _ENDING.append(process)
        _reap_ended()
        self._gone = True
        if self._errors is not None:
            self._errors.close()
            self._errors = None

    def __enter__(self) -> CheckingService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# Servers told to stop and not waited for (close(wait=False)): reaped once ended, and
# waited for when this process exits.
_ENDING: list[subprocess.Popen[bytes]] = []


def _reap_ended() -> None:
    _ENDING[:] = [p for p in _ENDING if p.poll() is None]


@atexit.register
def _wait_for_ending() -> None:
    while _ENDING:
        end_server(_ENDING.pop(), grace=10)


@dataclass
class _Collected:
    stage_ids: list[str] = field(default_factory=lambda: list(REQUIRED_STAGES))
    stages: dict[str, StageResult] = field(default_factory=dict)
    # The stages the checker said it started and has not ended (a check with a second
    # learner process runs two at once), in the order they started.
    running: list[str] = field(default_factory=list)
    learner_pids: list[int] = field(default_factory=list)  # a check may use two
    ready: bool = False
    done: bool = False
    error: str | None = None
    bug: tuple[str, str] | None = None  # a bug of ours in the checker: where, traceback
    output: str = ""
    notes: list[str] = field(default_factory=list)
    protection: ProtectionLevel | None = None
    mark: str = ""  # this job's output mark: the learner's process never holds it
    stage_of_output: str = ""
    by_stage: dict[str, str] = field(default_factory=dict)
    output_lines: int = 0
    cut: int = 0  # characters of unfinished lines not kept (a flood without line breaks)
    # Where all of the output goes, marks left out, when asked (memory keeps only tails).
    spill: IO[bytes] | None = None
    spilled: int = 0  # bytes written to ``spill``
    spill_cut: int = 0  # bytes not written: past OUTPUT_FILE_LIMIT
    _partial: str = ""

    def _spill(self, text: str) -> None:
        if self.spill is None or not text:
            return
        data = text.encode("utf-8", "replace")
        room = max(OUTPUT_FILE_LIMIT - self.spilled, 0)
        self.spill.write(data[:room])
        self.spilled += min(len(data), room)
        self.spill_cut += len(data) - min(len(data), room)

    def handle(self, message: dict[str, Any]) -> None:
        kind = message.get("type")
        if kind == "ready":
            self.ready = True
            stages = message.get("stages")
            if isinstance(stages, list) and all(s in STAGE_BY_ID for s in stages):
                self.stage_ids = [str(s) for s in stages]
        elif kind == "learner":
            self.learner_pids.append(int(message.get("pid", 0)))
        elif kind == "error":
            self.error = str(message.get("message"))
        elif kind == "bug":
            self.bug = str(message.get("where")), str(message.get("traceback"))
        elif kind == "stage-start":
            started = str(message.get("stage"))
            if started not in self.running:
                self.running.append(started)
        elif kind == "stage-end":
            result = message.get("result")
            if isinstance(result, dict):
                stage = StageResult.from_dict(result)
                self.stages[stage.id] = stage
                self.running = [r for r in self.running if r != stage.id]
            for note in message.get("notes", []):
                if str(note) not in self.notes:
                    self.notes.append(str(note))
        elif kind == "protection":
            self.protection = ProtectionLevel.from_dict(message.get("level"))
        elif kind == "done":
            self.done = True

    def add_output(self, chunk: bytes) -> None:
        """Split what arrives on the output pipe by the checker's stage marks (lines
        that start with OUTPUT_MARK and this job's mark); keep the tail of each."""
        self._partial += chunk.decode("utf-8", "replace")
        *lines, self._partial = self._partial.split("\n")
        marker = f"{OUTPUT_MARK}{self.mark} " if self.mark else None
        kept: list[str] = []
        for line in lines:
            at = line.find(marker) if marker is not None else -1
            if at >= 0 and marker is not None:  # a mark, maybe after an unfinished line
                self.stage_of_output = line[at + len(marker) :].strip()
                if at == 0:
                    continue
                line = line[:at]
            kept.append(line)
            self._spill(line + "\n")
            self.output_lines += 1
            if self.stage_of_output:
                # Under the stage ("backward") and under the stage and run ("backward|x: (7,) in float32").
                stage = self.stage_of_output.split("|", 1)[0]
                for key in {stage, self.stage_of_output}:
                    tail = self.by_stage.get(key, "") + line + "\n"
                    self.by_stage[key] = tail[-OUTPUT_TAIL:]
        if kept:
            self.output = (self.output + "\n".join(kept) + "\n")[-OUTPUT_TAIL * 4 :]
        if len(self._partial) > OUTPUT_LINE_LIMIT:
            # A flood without line breaks: only its tail is kept in memory (its head goes
            # to the output file, when there is one), and the cut is counted.
            head = len(self._partial) - OUTPUT_LINE_LIMIT
            self._spill(self._partial[:head])
            self.cut += head
            self._partial = self._partial[-OUTPUT_LINE_LIMIT:]

    def finish_output(self) -> None:
        """A last line without its newline is output too."""
        if self._partial:
            self.add_output(b"\n")


def run_check(
    exercise: Exercise,
    file: Path,
    *,
    seed: int = DEFAULT_SEED,
    timeout: float = DEFAULT_TIMEOUT,
    solution: Path | None = None,
    double_backward: bool = False,
    service: CheckingService | None = None,
    memory_limit_mb: int = DEFAULT_MEMORY_LIMIT_MB,
    stop_after_failure: bool = False,
    limits: HostLimits | None = None,
    draw_always: bool = False,
    feedback: str = DEFAULT_FEEDBACK,
    catalogue_file: bool = False,
    output_file: Path | None = None,
    only_stages: Sequence[str] = (),
    second_process: bool | None = None,
) -> CheckReport:
    """Check ``file`` against ``exercise`` and return the report, as ``feedback``
    (a level of :mod:`trainer.checking.feedback`) lets it be read.

    A symbolic link is never checked, nor a file of the trainer's own package unless
    ``catalogue_file`` (an author validating the installed catalogue).

    With ``service``, the check is one more job of a running server (watch
    mode, grading); otherwise a server is started for this one job. With
    ``stop_after_failure`` the stages after the first failing one are skipped, and
    a failing backward or contract stage stops at its first failing run (validation
    needs no more); with ``only_stages``, only those stages (and load) run (a
    reference solution's follow-up, once its other stages passed). With ``output_file``, all the learner's code printed
    is written there (up to OUTPUT_FILE_LIMIT bytes), not only the tails the report keeps.
    ``second_process`` (trusted/ahead.py): None, a second learner process runs some
    stages when the check runs alone and two CPUs are free; False, never; True,
    whenever the machine has two CPUs, even beside other checks.
    """
    started = time.monotonic()
    refused = refusal(file, catalogue_file)
    raw = b"" if refused else file.read_bytes()  # one read: the verdict is this version's
    try:
        if refused:
            raise _Refused(refused)
        source = raw.decode("utf-8-sig")
    except (UnicodeDecodeError, _Refused) as error:
        why = (
            str(error)
            if isinstance(error, _Refused)
            else f"{file.name} is not UTF-8 text (byte {error.start} cannot be decoded)"
        )
        stages = [StageResult("load", Verdict.FAIL, why)] + [StageResult(s.id, Verdict.SKIP, "skipped: the file did not load") for s in stages_for(exercise, double_backward) if s.id != "load"]  # fmt: skip
        report = _report(exercise, file, raw, seed, stages, started, "")
    else:
        try:
            report = _check(
                exercise, file, raw, source, started, seed, timeout, solution, double_backward,
                service, memory_limit_mb, stop_after_failure, limits, draw_always, output_file,
                only_stages, second_process, catalogue_file,
            )  # fmt: skip
        except (TrainerError, OSError):  # the user's to fix: said as such
            raise
        except CheckerBugError as bug:  # the checking server's, before the check began
            report = _with_bug(
                exercise, file, raw, seed, started, _stage_ids(exercise, double_backward), {},
                bug.where, bug.traceback,
            )  # fmt: skip
        except Exception:  # a bug of ours, here
            report = _with_bug(
                exercise, file, raw, seed, started, _stage_ids(exercise, double_backward), {},
                "the CLI's runner", format_exc(),
            )  # fmt: skip
    declared = {name: mistake.words for name, mistake in exercise.mistakes.items()}
    return with_feedback(report, feedback, declared)


class _Refused(Exception):
    """A file the checker does not run (a symbolic link, one of the trainer's own)."""


def refusal(file: Path, catalogue_file: bool = False) -> str | None:
    """Why ``file`` is not checked at all, or None. A symbolic link is refused wherever
    it points (a class's submission linked to the reference solution, say): the checker
    reads the file itself. A file inside the trainer's own package (which holds the
    catalogue when installed) is refused too, however it was named."""
    if file.is_symlink():
        try:
            target = os.readlink(file)
        except OSError:
            target = "?"
        return (
            f"{file.name} is a symbolic link (to {target}), not a file: a check reads the "
            "file itself. Copy your code into a real file and check that"
        )
    resolved = file.resolve()
    if catalogue_file:
        return None
    if resolved.is_relative_to(Path(trainer.__file__).resolve().parent):
        return (
            f"{file.name} is one of the trainer's own files ({resolved}): a check runs "
            "your file, not the catalogue's"
        )
    return None


def _exercise_folders(exercise: Exercise, solution: Path | None) -> list[Path]:
    """The folders the learner's process must not read: the exercise's spec and solution
    folders (the trainer's own package and catalogue are covered in any case)."""
    folders = [exercise.source.resolve().parent]
    if solution is not None:
        folders.append(solution.resolve().parent)
    return folders


def _check(
    exercise: Exercise,
    file: Path,
    raw: bytes,
    source: str,
    started: float,
    seed: int,
    timeout: float,
    solution: Path | None,
    double_backward: bool,
    service: CheckingService | None,
    memory_limit_mb: int,
    stop_after_failure: bool,
    limits: HostLimits | None,
    draw_always: bool,
    output_file: Path | None = None,
    only_stages: Sequence[str] = (),
    second_process: bool | None = None,
    catalogue_file: bool = False,
) -> CheckReport:
    token = secrets.token_hex(16)
    job = Job(
        exercise=dict(exercise.data),
        spec_path=str(exercise.source.resolve()),
        spec_name=_display(exercise.source),
        file=str(file.resolve()),
        source=source,
        seed=seed,
        solution=str(solution) if solution is not None else None,
        double_backward=double_backward,
        memory_limit_mb=memory_limit_mb,
        stop_after_failure=stop_after_failure,
        only_stages=list(only_stages),
        more_checks=service is not None,
        draw_always=draw_always,
        second_process=second_process,
        confine=(limits or HostLimits()).for_job(timeout, _exercise_folders(exercise, solution)),
        catalogue_file=catalogue_file,
        token=token,
        output_mark=secrets.token_hex(8),
    )
    if service is None:
        own = CheckingService()
        try:
            return _run_job(own, job, exercise, file, raw, started, timeout, output_file)
        finally:
            # The server ends (it frees torch's memory: ~40 ms) while the report is drawn.
            own.close(wait=False)
    return _run_job(service, job, exercise, file, raw, started, timeout, output_file)


def _run_job(
    service: CheckingService,
    job: Job,
    exercise: Exercise,
    file: Path,
    raw: bytes,
    started: float,
    timeout: float,
    output_file: Path | None = None,
) -> CheckReport:
    seed = job.seed
    for attempt in range(SERVER_RETRIES + 1):
        last = attempt == SERVER_RETRIES
        with contextlib.ExitStack() as files:
            spill = files.enter_context(open(output_file, "wb")) if output_file else None
            collected, timed_out, returncode, died = _attempt(service, job, timeout, last, spill)
        # A server that died under this check (its zygote, say) is not the learner's
        # doing: the check runs again, whole, on a fresh one.
        if not died or last:
            break

    if collected.bug is not None:
        where, text = collected.bug
        return _with_bug(
            exercise, file, raw, seed, started, collected.stage_ids, collected.stages, where, text
        )
    if collected.error:
        raise TrainerError(collected.error)
    if not collected.ready and not timed_out:
        # The checker ended before the learner's code ran, in a server that has torch:
        # nothing of the learner's could have done it.
        how = processes.code_words(returncode) if returncode is not None else "ended"
        text = f"{collected.output}\nthe checker {how} before the check began"
        return _with_bug(
            exercise, file, raw, seed, started, collected.stage_ids, {}, "the checker", text
        )
    stages = _stages(collected, timed_out, timeout, returncode)
    report = _report(exercise, file, raw, seed, stages, started, collected.output[-OUTPUT_TAIL:])
    report.notes = collected.notes
    if collected.spill_cut:
        report.notes.append(
            f"Your code printed {collected.spill_cut:,} bytes more than the output file "
            f"keeps ({OUTPUT_FILE_LIMIT:,} bytes): that part was cut."
        )
    elif collected.cut and collected.spill is None:
        report.notes.append(
            f"Your code printed {collected.cut:,} more characters without a line break than "
            f"the checker keeps ({OUTPUT_LINE_LIMIT:,} of a line): that part was cut."
        )
    report.output_by_stage = dict(collected.by_stage)
    report.output_lines = collected.output_lines
    report.protection = collected.protection
    return report


def _attempt(
    service: CheckingService,
    job: Job,
    timeout: float,
    last: bool,
    spill: IO[bytes] | None = None,
) -> tuple[_Collected, bool, int | None, bool]:
    """One run of the job: what was collected, whether it timed out, the checker's exit
    code when it ended without its last frame, and whether the server died under it."""
    token = job.token
    try:
        launched = service.launch(job)
    except ServerStopped:
        if last:
            raise
        return _Collected(), False, None, True
    collected = _Collected(mark=job.output_mark, spill=spill)
    try:
        # The limit is for the check itself, not for starting the server.
        timed_out = _collect(launched, token, collected, time.monotonic() + timeout)
    finally:
        # Whatever is still running ends with the check: the checker's group, and
        # with it (the zygote sees the checker go) the learner's process. A checker
        # of the catalogue's files that finished may check the next (server._Pool):
        # it stopped its learner's process before its last word.
        if not (collected.done and job.catalogue_file):
            processes.kill_group(launched.pid)
        os.close(launched.result_read)
        os.close(launched.output_read)
        for pid in collected.learner_pids:
            _wait_until_gone(pid, 3.0)
        service.landed()
    if collected.done:
        # A server killed mid-check still lets its checker finish, failing the stages the
        # zygote's end cut short: its socket closed first, so the word is already here.
        passed = all(stage.verdict != Verdict.FAIL for stage in collected.stages.values())
        return collected, timed_out, None, not passed and service.died_since(launched.generation, 0)
    returncode = service.exit_code(launched.pid, 2.0)
    died = not timed_out and service.died_since(launched.generation, 1.0)
    return collected, timed_out, returncode, died


def _wait_until_gone(pid: int, seconds: float) -> None:
    """Until ``pid`` is gone or a zombie (its parent, the zygote, reaps it)."""
    if pid <= 0:
        return
    if processes.ended_within(pid, seconds) is not None:
        return
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return
        if stat.rsplit(")", 1)[-1].split()[0] in ("Z", "X"):
            return
        time.sleep(0.005)


def _collect(launched: Launched, token: str, collected: _Collected, deadline: float) -> bool:
    """Read results and output until ``done``, the end of the result pipe, or the deadline.

    Returns True when the deadline passed first. The output pipe may stay open
    after the checker ends (a process the learner started holds it): it is read
    along the way, never waited for.
    """
    selector = selectors.DefaultSelector()
    selector.register(launched.result_read, selectors.EVENT_READ, "result")
    selector.register(launched.output_read, selectors.EVENT_READ, "output")
    frames = transport.FrameReader()
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
                    collected.add_output(chunk)
                    continue
                if not chunk:
                    result_open = False
                    break
                for header in frames.feed(chunk):
                    if secrets.compare_digest(str(header.get("token", "")), token):
                        collected.handle(header)  # anything unstamped is not the checker's
        _drain_output(selector, launched.output_read, collected)
        collected.finish_output()
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
        collected.add_output(chunk)


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
        # The first stage the checker said it started and did not end; before any word,
        # the first without a result.
        started = [r for r in collected.running if r in collected.stage_ids]
        if started and stage not in started:
            stages.append(StageResult(stage, Verdict.SKIP, "skipped: the check stopped"))
            continue
        if timed_out:
            message = (
                f"timed out after {timeout:g} s during {STAGE_BY_ID[stage].title.lower()}: "
                "an endless loop? (raise the limit with --timeout)"
            )
        else:
            how = processes.code_words(returncode) if returncode is not None else "ended"
            message = f"the checking process {how} during {STAGE_BY_ID[stage].title.lower()}"
        stages.append(StageResult(stage, Verdict.FAIL, message))
        stopped = True
    return stages


def _with_bug(
    exercise: Exercise,
    file: Path,
    raw: bytes,
    seed: int,
    started: float,
    stage_ids: Sequence[str],
    finished: dict[str, StageResult],
    where: str,
    traceback: str,
) -> CheckReport:
    """The report of a check that a bug of ours stopped: the stages that finished keep
    their verdicts; the rest are skipped, none failed. The traceback goes to a file."""
    skipped = "skipped: the checker hit a bug"
    stages = [finished.get(s) or StageResult(s, Verdict.SKIP, skipped) for s in stage_ids]
    about = {"exercise": exercise.id, "file": str(file), "seed": str(seed)}
    path = write_bug_report(where, traceback, about)
    report = _report(exercise, file, raw, seed, stages, started, "")
    report.bug = CheckerBug(where, last_line(traceback), str(path) if path else "")
    return report


def _stage_ids(exercise: Exercise, double_backward: bool) -> list[str]:
    return [stage.id for stage in stages_for(exercise, double_backward)]


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
