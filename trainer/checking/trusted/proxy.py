"""The checker's side of the learner's process: start it, call it, and wrap it as a Function.

:func:`Sandbox.start` asks the learner zygote for the process that runs the
learner's code. The
:func:`proxy_function` it offers is a ``torch.autograd.Function`` of the
checker's own whose forward and backward ask that process for the learner's
results, so torch's autograd engine and ``gradcheck`` run here, untouched by
the learner's code, on the learner's answers.
"""

from __future__ import annotations

import contextlib
import select
import socket
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import torch

from trainer.checking import processes, protocol, transport
from trainer.checking.protocol import R
from trainer.checking.trusted.compare import describe_value
from trainer.checking.trusted.returned import Input, refusal
from trainer.checking.wording import changed_words, foreign_graph
from trainer.spec import Exercise


class LearnerFault(Exception):
    """The learner's code failed or answered something unusable; the message says what.
    ``mistake``: the classic mistake it is (an id of :data:`trainer.vocabulary.MISTAKES`),
    told from values, never from words; ``input``: the forward parameter it is about."""

    def __init__(
        self, message: str, details: Sequence[str] = (), mistake: str = "", input: str = ""
    ) -> None:
        super().__init__(message)
        self.message = message
        self.details = list(details)
        self.mistake = mistake
        self.input = input


class LearnerProcessEnded(LearnerFault):
    """The process running the learner's code ended (a crash, ``os._exit``, a signal)."""


class LearnerSideBug(Exception):
    """A bug of ours in the learner process's handler of a request, not the learner's
    code: the process says so with its traceback (``{"bug": ...}``), and the check
    stops on it as on any bug of the checker's (:mod:`trainer.bugs`). Its words end
    with that traceback, so that every traceback of it holds both sides."""

    def __init__(self, op: str, traceback: str) -> None:
        super().__init__(f"in the learner process's handler of `{op}`:\n{traceback.rstrip()}")
        self.op = op


class Sandbox:
    """The learner's process, as the checker sees it: a socket to call it on.

    The process is a fork of the learner zygote, which reports its pid and,
    when it ends, its exit status on a control socket private to this check;
    closing that socket (or :meth:`stop`) ends the process and all it started.
    """

    def __init__(
        self, pid: int, calls: socket.socket | None, control: socket.socket | None
    ) -> None:
        self.pid = pid
        self._calls = calls
        self._control = control
        self.ended: str | None = None  # how the process ended, once it has
        self.patched: list[str] = []  # names the learner's code replaced, as it reported them
        # How the proxy hands tensors over: "plain", "strided" (not contiguous),
        # "permuted" (channels-last) or "expanded" (stride 0), and on which device the
        # learner's code runs.
        self.input_layout = "plain"
        self.grad_layout = "plain"
        self.device = "cpu"
        self.protection: object = None  # host protection, as the process said when loading
        # forward's parameters with defaults, as loading found them (-1: *args): backward
        # may return a trailing None for each, as autograd allows
        self.optional_inputs = 0
        # A descriptor read while a reply is awaited (the process's own output pipe,
        # for a second process: trusted/ahead.py), and how.
        self._also: tuple[int, Callable[[], bool]] | None = None

    def also_read(self, fd: int, read: Callable[[], bool]) -> None:
        """While waiting for a reply, ``read()`` whenever ``fd`` is readable (a process
        that fills a pipe nobody reads would never reply); ``read`` says False at the
        pipe's end, and ``fd`` is not watched after that."""
        self._also = fd, read

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
        zygote: socket.socket,
        exercise: Exercise,
        *,
        source: str,
        path: Path,
        memory_limit_mb: int | None = None,
        confine: dict[str, Any] | None = None,
        imports: Sequence[str] = (),
        more: bool = True,
        output: int = 1,
        second: bool = False,
    ) -> Sandbox:
        """Ask the zygote for a fresh learner process for ``source``. ``imports``: the
        torch modules its calls will import on first use, which the zygote imports
        once for all its learner processes; ``more``: whether more checks may follow;
        ``output``: where it prints (this process's output, the job's output pipe);
        ``second``: the check's second process (see :mod:`ahead`)."""
        control, control_theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        calls, calls_theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        spawn = protocol.Spawn(
            learner=protocol.LearnerFacts(
                class_name=exercise.class_name,
                param_names=list(exercise.param_names),
                outputs=exercise.outputs,
                form=exercise.form,
                file=str(path),
                cwd=str(path.parent),
                source=source,
            ),
            memory_limit_mb=memory_limit_mb,
            confine=confine,
            imports=list(imports),
            more=more,
            second=second,
        )
        try:
            transport.send_with_fds(
                zygote,
                spawn.to_wire(),
                [control_theirs.fileno(), calls_theirs.fileno(), output],
            )
            reply, _ = transport.receive_with_fds(control, 0)
            pid = int(reply.get("pid", 0))
        except (OSError, transport.WireError, ValueError):
            pid = 0
        finally:
            control_theirs.close()
            calls_theirs.close()
        sandbox = cls(pid, calls, control)
        if not pid:
            sandbox.ended = "could not be started (the checking server stopped)"
        return sandbox

    @property
    def alive(self) -> bool:
        return self.ended is None

    def call(self, request: protocol.Request[R]) -> R:
        """Send ``request``, wait for its reply; the learner's own failure is left in
        ``reply.error`` (see :meth:`answer` to raise it)."""
        if self.ended is not None or self._calls is None:
            raise LearnerProcessEnded(f"the process running your code {self.ended}")
        fd = self._calls.fileno()
        header, blobs = request.encode()
        try:
            transport.send(fd, header, blobs)
            self._wait_for_reply()
            raw, reply_blobs = transport.receive(fd)
            if isinstance(raw, dict) and isinstance(raw.get("bug"), str):
                # A bug of ours in the learner's process (its reply may be of any type).
                raise LearnerSideBug(request.op, raw["bug"])
            reply = request.reply.decode(raw, reply_blobs)
        except (transport.PeerGone, BrokenPipeError, ConnectionResetError):
            self.ended = self._ended_words()
            raise LearnerProcessEnded(f"the process running your code {self.ended}") from None
        except transport.WireError as error:
            raise self.unreadable(error, request.answer_words) from None
        if reply.bug is not None:
            raise LearnerSideBug(request.op, reply.bug)
        self.patched.extend(p for p in reply.patched if p not in self.patched)
        return reply  # type: ignore[return-value]

    def answer(self, request: protocol.Request[R]) -> R:
        """:meth:`call`, raising the learner's failure as a :class:`LearnerFault`."""
        reply = self.call(request)
        raise_error(reply)
        return reply

    def unreadable(self, error: transport.WireError, what: str = "a reply") -> LearnerProcessEnded:
        """Stop a process that sent a reply the checker cannot read (its frame, or the
        values in it): no learner-side code sends one, and what the process sends next
        cannot be trusted to answer the next request. Returns the fault to raise."""
        self.stop()
        self.ended = "sent a reply the checker cannot read"
        return LearnerProcessEnded(
            f"the process running your code sent {what} the checker cannot read ({error})"
        )

    def _wait_for_reply(self) -> None:
        # A learner's code may fork and keep the socket open after its process
        # died: watch the zygote's word on the process too, not only the socket.
        assert self._calls is not None and self._control is not None
        calls, control = self._calls.fileno(), self._control.fileno()
        while True:
            also = [self._also[0]] if self._also is not None else []
            ready, _, _ = select.select([calls, control, *also], [], [])
            if self._also is not None and self._also[0] in ready:
                if not self._also[1]():
                    self._also = None
                if len(ready) == 1:
                    continue
            break
        if calls in ready:
            return
        self.ended = self._ended_words()
        raise transport.PeerGone("ended")

    def _ended_words(self) -> str:
        """How the process ended, as the zygote reports it (waiting briefly for the word)."""
        if self.ended is not None:
            return self.ended
        if self._control is None:
            return "ended"
        ready, _, _ = select.select([self._control], [], [], 2.0)
        if not ready:
            return "ended"
        try:
            reply, _ = transport.receive_with_fds(self._control, 0)
        except (OSError, transport.WireError):
            return "ended"
        code = reply.get("code")
        if not isinstance(code, int):
            return "ended"
        words = processes.code_words(code)
        return words + " (did your code call os._exit?)" if code == 0 else words

    def hang_up(self) -> None:
        """From another thread: end the conversation. The call waiting on it there
        returns as if the process had ended (:meth:`stop` follows, there)."""
        calls = self._calls
        if calls is not None:
            with contextlib.suppress(OSError):
                calls.shutdown(socket.SHUT_RDWR)

    def stop(self) -> None:
        """End the learner's process and everything it started; wait until they are gone."""
        if self._calls is not None:
            self._calls.close()
            self._calls = None
        if self._control is not None:
            with contextlib.suppress(OSError, transport.WireError):
                transport.send_with_fds(self._control, {"op": "stop"})
                while True:  # an exit report may come first
                    reply, _ = transport.receive_with_fds(self._control, 0)
                    if reply.get("stopped"):
                        break
            self._control.close()
            self._control = None
        self.ended = self.ended or "was stopped"

    # -- the calls ---------------------------------------------------------------------------

    def load(self) -> protocol.LoadReply:
        self.protection = self.call(protocol.Protection()).protection
        reply = self.call(protocol.Load())
        self.optional_inputs = reply.optional_inputs
        return reply

    def forward(
        self,
        args: Sequence[object],
        requires_grad: Sequence[bool],
        keep: bool = True,
        layout: str | None = None,
    ) -> protocol.ForwardReply:
        return self.answer(
            protocol.Forward(
                args=list(args),
                requires_grad=list(requires_grad),
                keep=keep,
                device=self.device,
                layout=layout or self.input_layout,
            )
        )

    def backward(
        self,
        handle: int,
        grads: Sequence[torch.Tensor | None],
        layout: str | None = None,
    ) -> protocol.BackwardReply:
        return self.answer(
            protocol.Backward(
                handle_id=handle,
                grads=list(grads),
                device=self.device,
                layout=layout or self.grad_layout,
            )
        )

    def reset(self) -> None:
        if self.alive:
            self.call(protocol.Reset())


def fault_of(reply: protocol.Reply) -> LearnerFault | None:
    """The learner's failure a reply carries (its words, details and the mistake's id),
    or None."""
    error = reply.error
    if error is None:
        return None
    return LearnerFault(error.message, error.details, mistake=error.mistake)


def raise_error(reply: protocol.Reply) -> None:
    """The learner's failure a reply carries, as a :class:`LearnerFault`."""
    fault = fault_of(reply)
    if fault is not None:
        raise fault


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
        reply = sandbox.forward(args, flags, keep=any(flags))
        outputs = forward_outputs(reply.outputs, exercise)
        if reply.no_graph:
            raise LearnerFault(
                "forward's output is not connected to the graph: return a new tensor, "
                "not a detached one"
                + (
                    ", and mark only outputs with no gradient non-differentiable"
                    if exercise.outputs > 1
                    else ""
                )
            )
        if reply.foreign_graph:
            raise LearnerFault(foreign_graph(exercise.class_name))
        ctx.handle = reply.handle
        ctx.advice = reply.advice
        ctx.inputs = [Input.of(a) for a in args]  # what backward's values are held to
        return outputs[0] if exercise.outputs == 1 else outputs

    def backward(ctx: Any, *grads: torch.Tensor) -> object:
        back = sandbox.backward(ctx.handle, grads)
        result = back.result
        if back.changed:  # the caller's tensors: on any input, in any stage
            raise LearnerFault(changed_words(back.changed), mistake="changes_caller_tensors")
        # What torch's engine would refuse, refused first in the learner's terms.
        found = refusal(result, ctx.inputs, ctx.needs_input_grad, names)
        if found is not None:
            raise LearnerFault(found.words, mistake=found.mistake, input=found.input)
        return result

    return type(
        exercise.class_name,
        (torch.autograd.Function,),
        {"forward": staticmethod(forward), "backward": staticmethod(backward)},
    )
