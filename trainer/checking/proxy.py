"""The checker's side of the learner's process: start it, call it, and wrap it as a Function.

:func:`Sandbox.start` forks the process that runs the learner's code. The
:func:`proxy_function` it offers is a ``torch.autograd.Function`` of the
checker's own whose forward and backward ask that process for the learner's
results, so torch's autograd engine and ``gradcheck`` run here, untouched by
the learner's code, on the learner's answers.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import torch

from trainer.checking import wire
from trainer.checking.compare import describe_value
from trainer.spec import Exercise


class LearnerFault(Exception):
    """The learner's code failed or answered something unusable; the message says what."""

    def __init__(self, message: str, details: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.details = list(details)


class LearnerProcessEnded(LearnerFault):
    """The process running the learner's code ended (a crash, ``os._exit``, a signal)."""


def _exit_words(status: int) -> str:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        return f"was killed by {name}"
    code = os.WEXITSTATUS(status)
    words = f"exited with code {code}"
    return words + " (did your code call os._exit?)" if code == 0 else words


class Sandbox:
    """A forked process that runs the learner's file and answers forward/backward calls."""

    def __init__(self, pid: int, requests: int, replies: int) -> None:
        self.pid = pid
        self._requests = requests
        self._replies = replies
        self.ended: str | None = None  # how the process ended, once it has
        self.patched: list[str] = []  # names the learner's code replaced, as it reported them
        # How the proxy hands tensors over: "plain", "strided" (not contiguous)
        # or "expanded" (stride 0), and on which device the learner's code runs.
        self.input_layout = "plain"
        self.grad_layout = "plain"
        self.device = "cpu"

    @contextlib.contextmanager
    def layouts(self, inputs: str = "plain", grads: str = "plain") -> Iterator[None]:
        saved = self.input_layout, self.grad_layout
        self.input_layout, self.grad_layout = inputs, grads
        try:
            yield
        finally:
            self.input_layout, self.grad_layout = saved

    @classmethod
    def start(
        cls,
        exercise: Exercise,
        source: str,
        path: Path,
        close_in_child: Sequence[int] = (),
        memory_limit_mb: int | None = None,
    ) -> Sandbox:
        to_child_read, to_child_write = os.pipe()
        from_child_read, from_child_write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the learner's process
            try:
                os.close(to_child_write)
                os.close(from_child_read)
                for fd in close_in_child:  # the checker's own channels: never the learner's
                    with contextlib.suppress(OSError):
                        os.close(fd)
                # input() in the learner's code gets end-of-file at once.
                devnull = os.open(os.devnull, os.O_RDONLY)
                if devnull != 0:  # fd 0 may have been one of the closed channels
                    os.dup2(devnull, 0)
                    os.close(devnull)
                from trainer.checking.sandbox import limit_memory, serve

                limit_memory(memory_limit_mb)
                serve(exercise, source, path, to_child_read, from_child_write)
            finally:
                os._exit(4)
        os.close(to_child_read)
        os.close(from_child_write)
        return cls(pid, to_child_write, from_child_read)

    @property
    def alive(self) -> bool:
        return self.ended is None

    def call(
        self, request: dict[str, Any], blobs: list[bytes] | None = None
    ) -> tuple[dict[str, Any], list[bytes]]:
        if self.ended is not None:
            raise LearnerProcessEnded(f"the process running your code {self.ended}")
        try:
            wire.send(self._requests, request, blobs or [])
            self._wait_for_reply()
            reply, reply_blobs = wire.receive(self._replies)
        except (wire.PeerGone, BrokenPipeError):
            self.ended = self._reap()
            raise LearnerProcessEnded(f"the process running your code {self.ended}") from None
        except wire.WireError as error:
            self.stop()
            self.ended = "sent an unreadable reply"
            raise LearnerProcessEnded(
                f"the process running your code sent an unreadable reply ({error})"
            ) from None
        patched = reply.get("patched")
        if isinstance(patched, list):
            self.patched.extend(str(p) for p in patched if str(p) not in self.patched)
        return reply, reply_blobs

    def _wait_for_reply(self) -> None:
        # A learner's code may fork and keep the reply pipe open after this
        # process died: watch the process too, not only the pipe.
        while True:
            ready, _, _ = select.select([self._replies], [], [], 0.2)
            if ready:
                return
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.ended = _exit_words(status)
                raise wire.PeerGone("ended")

    def _reap(self) -> str:
        if self.ended is not None:
            return self.ended
        try:
            _, status = os.waitpid(self.pid, 0)
        except ChildProcessError:
            return "ended"
        return _exit_words(status)

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._requests)
        with contextlib.suppress(OSError):
            os.close(self._replies)
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)
        self.ended = self.ended or "was stopped"

    # -- the calls ---------------------------------------------------------------------------

    def load(self) -> dict[str, Any]:
        reply, _ = self.call({"op": "load"})
        return reply

    def forward(
        self,
        args: Sequence[object],
        requires_grad: Sequence[bool],
        keep: bool = True,
        layout: str | None = None,
    ) -> tuple[object, dict[str, Any]]:
        blobs: list[bytes] = []
        request = {
            "op": "forward",
            "args": wire.encode(list(args), blobs, layout or self.input_layout),
            "requires_grad": list(requires_grad),
            "keep": keep,
            "device": self.device,
        }
        reply, reply_blobs = self.call(request, blobs)
        _raise_error(reply)
        try:
            outputs = wire.decode(reply.get("outputs"), reply_blobs)
        except wire.WireError as error:
            raise LearnerFault(f"forward's result could not be read ({error})") from None
        return outputs, reply

    def backward(
        self,
        handle: int,
        grads: Sequence[torch.Tensor | None],
        layout: str | None = None,
    ) -> tuple[object, dict[str, Any]]:
        blobs: list[bytes] = []
        items = [wire.encode(g, blobs, layout=layout or self.grad_layout) for g in grads]
        request = {
            "op": "backward",
            "handle": handle,
            "grads": {"t": "list", "items": items},
            "device": self.device,
        }
        reply, reply_blobs = self.call(request, blobs)
        _raise_error(reply)
        try:
            result = wire.decode(reply.get("result"), reply_blobs)
        except wire.WireError as error:
            raise LearnerFault(f"backward's result could not be read ({error})") from None
        return result, reply

    def reset(self) -> None:
        if self.alive:
            self.call({"op": "reset"})


def _raise_error(reply: dict[str, Any]) -> None:
    error = reply.get("error")
    if isinstance(error, dict):
        details = error.get("details", [])
        raise LearnerFault(
            str(error.get("message", "your code failed")),
            [str(d) for d in details] if isinstance(details, list) else [],
        )


def forward_outputs(result: object, exercise: Exercise) -> tuple[torch.Tensor, ...]:
    """The learner's forward result as tensors, or a :class:`LearnerFault` saying why not."""
    if exercise.outputs == 1:
        if isinstance(result, torch.Tensor):
            return (result,)
        if isinstance(result, tuple | list):
            raise LearnerFault(
                f"forward returned a {type(result).__name__} of {len(result)} values; expected one tensor"
            )
        raise LearnerFault(f"forward returned {describe_value(result)}; expected a tensor")
    if not isinstance(result, tuple | list) or len(result) != exercise.outputs:
        raise LearnerFault(
            f"forward returned {describe_value(result)}; expected a tuple of {exercise.outputs} tensors"
        )
    for index, item in enumerate(result):
        if not isinstance(item, torch.Tensor):
            raise LearnerFault(f"forward's output {index} is {describe_value(item)}, not a tensor")
    return tuple(result)


def proxy_function(sandbox: Sandbox, exercise: Exercise) -> type[torch.autograd.Function]:
    """A Function whose forward and backward are the learner's, computed in the sandbox."""
    names = exercise.param_names

    def forward(ctx: Any, *args: object) -> object:
        flags = [bool(f) for f in ctx.needs_input_grad]
        result, reply = sandbox.forward(args, flags, keep=any(flags))
        outputs = forward_outputs(result, exercise)
        if reply.get("no_graph"):
            raise LearnerFault(
                "forward's output is not connected to the graph: return a new tensor, "
                "not a detached one"
            )
        if reply.get("foreign_graph"):
            raise LearnerFault(
                f"the output was not produced by `{exercise.class_name}.apply`: its gradient "
                "would not come from your backward"
            )
        ctx.handle = reply.get("handle")
        ctx.advice = reply.get("advice")
        return outputs[0] if exercise.outputs == 1 else outputs

    def backward(ctx: Any, *grads: torch.Tensor) -> object:
        result, _ = sandbox.backward(ctx.handle, grads)
        if isinstance(result, list):
            # torch's own engine rejects a list ("expected Variable or None (got list)").
            raise LearnerFault(
                f"backward returned a list of {len(result)} values: return a tuple "
                "(or a single tensor when forward has one input); autograd rejects a list"
            )
        values = result if isinstance(result, tuple) else (result,)
        for index, value in enumerate(values):
            if value is not None and not isinstance(value, torch.Tensor):
                name = f"`{names[index]}`" if index < len(names) else f"position {index}"
                raise LearnerFault(
                    f"backward returned {describe_value(value)} for {name}; return a tensor "
                    "(or None for an input that needs no gradient)"
                )
        return tuple(values) if isinstance(result, tuple) else result

    return type(
        exercise.class_name,
        (torch.autograd.Function,),
        {"forward": staticmethod(forward), "backward": staticmethod(backward)},
    )
