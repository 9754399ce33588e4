"""The learner's side: a forked process that imports the scratch file and answers calls.

The checker (the trusted process) never runs the learner's code itself. It asks
this process to call ``forward`` or ``backward`` and gets back plain values over
a pipe; every comparison and every verdict happens on the checker's side. So a
learner's code that patches torch, prints fake results or pokes at the
checker's memory only changes its own answers, and a wrong answer still fails.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import torch

from trainer.checking import wire
from trainer.checking.guard import NamespaceGuard
from trainer.checking.learner import (
    LearnerProblem,
    explain_learner_error,
    find_function_class,
    import_source,
)
from trainer.spec import Exercise


class _Server:
    def __init__(self, exercise: Exercise, source: str, path: Path) -> None:
        self.exercise = exercise
        self.source = source
        self.path = path
        self.function_class: type[torch.autograd.Function] | None = None
        self.handles: dict[int, tuple[object, Any]] = {}  # handle -> (outputs, ctx)
        self.next_handle = 0
        self.guard = NamespaceGuard.for_checker([torch.Tensor, torch.autograd.Function])

    def handle(
        self, request: dict[str, Any], blobs: list[bytes]
    ) -> tuple[dict[str, Any], list[bytes]]:
        try:
            return self._handle(request, blobs)
        except Exception as error:  # e.g. a returned value that cannot be sent back
            message = f"what your code returned could not be read ({type(error).__name__}: {error})"
            return {"error": {"message": message, "details": []}}, []

    def _handle(
        self, request: dict[str, Any], blobs: list[bytes]
    ) -> tuple[dict[str, Any], list[bytes]]:
        op = request.get("op")
        reply_blobs: list[bytes] = []
        if op == "load":
            reply = self.load()
        elif op == "forward":
            reply = self.forward(request, blobs, reply_blobs)
        elif op == "backward":
            reply = self.backward(request, blobs, reply_blobs)
        elif op == "double":
            reply = self.double(request, blobs, reply_blobs)
        elif op == "reset":
            self.handles.clear()
            reply = {}
        else:
            reply = {"error": {"message": f"unknown request {op!r}", "details": []}}
        patched = self.guard.restore()
        if patched:
            reply["patched"] = patched
        return reply, reply_blobs

    def load(self) -> dict[str, Any]:
        try:
            module = import_source(self.source, self.path)
            self.function_class = find_function_class(module, self.exercise, self.path)
        except LearnerProblem as problem:
            return {"problem": {"message": problem.message, "details": problem.details}}
        return {}

    def forward(
        self, request: dict[str, Any], blobs: list[bytes], reply_blobs: list[bytes]
    ) -> dict[str, Any]:
        function_class = self.function_class
        if function_class is None:
            return {"error": {"message": "the class was not loaded", "details": []}}
        args = _arguments(request, blobs)
        flags = request.get("requires_grad", [])
        try:
            result = function_class.apply(*args)  # type: ignore[no-untyped-call]
        except BaseException as error:  # the learner's code may raise anything
            message, details = explain_learner_error(error, self.path, "forward")
            return {"error": {"message": message, "details": details}}
        reply: dict[str, Any] = {"outputs": wire.encode(result, reply_blobs)}
        outputs = result if isinstance(result, tuple | list) else (result,)
        tensors = [o for o in outputs if isinstance(o, torch.Tensor)]
        ctx = next((t.grad_fn for t in tensors if t.grad_fn is not None), None)
        if any(flags):
            if ctx is None:
                reply["no_graph"] = True
            elif getattr(type(ctx), "_forward_cls", None) is not function_class:
                reply["foreign_graph"] = True
            elif request.get("keep", True):
                self.next_handle += 1
                self.handles[self.next_handle] = (result, ctx)
                reply["handle"] = self.next_handle
                reply["advice"] = _advice(ctx)
        return reply

    def double(
        self, request: dict[str, Any], blobs: list[bytes], reply_blobs: list[bytes]
    ) -> dict[str, Any]:
        function_class = self.function_class
        if function_class is None:
            return {"error": {"message": "the class was not loaded", "details": []}}
        args = _arguments(request, blobs)
        upstream = list(wire.decode(request["upstream"], blobs))  # type: ignore[call-overload]
        vector = list(wire.decode(request["vector"], blobs))  # type: ignore[call-overload]
        try:
            second = _double(function_class, args, upstream, vector)
        except BaseException as error:  # the learner's code may raise anything
            message, details = explain_learner_error(error, self.path, "double backward")
            return {"error": {"message": message, "details": details}}
        return {"second": wire.encode(second, reply_blobs)}

    def backward(
        self, request: dict[str, Any], blobs: list[bytes], reply_blobs: list[bytes]
    ) -> dict[str, Any]:
        function_class = self.function_class
        stored = self.handles.get(int(request.get("handle", -1)))
        if function_class is None or stored is None:
            return {"error": {"message": "no forward call to take the backward of", "details": []}}
        _, ctx = stored
        grads = list(wire.decode(request["grads"], blobs))  # type: ignore[call-overload]
        device = str(request.get("device", "cpu"))
        if device != "cpu":
            grads = [g.to(device) if isinstance(g, torch.Tensor) else g for g in grads]
        before = [g.clone() if isinstance(g, torch.Tensor) else None for g in grads]
        try:
            result = function_class.backward(ctx, *grads)
        except BaseException as error:  # the learner's code may raise anything
            message, details = explain_learner_error(error, self.path, "backward")
            return {"error": {"message": message, "details": details}}
        modified = [
            i
            for i, (g, b) in enumerate(zip(grads, before, strict=True))
            if isinstance(g, torch.Tensor) and b is not None and not torch.equal(g, b)
        ]
        return {"result": wire.encode(result, reply_blobs), "modified": modified}


def _arguments(request: dict[str, Any], blobs: list[bytes]) -> list[Any]:
    """forward's arguments: on the requested device, leaves requiring grad as flagged."""
    args: list[Any] = list(wire.decode(request["args"], blobs))  # type: ignore[call-overload]
    device = str(request.get("device", "cpu"))
    flags = request.get("requires_grad", [])
    for index, value in enumerate(args):
        if isinstance(value, torch.Tensor):
            if device != "cpu":
                value = value.to(device)
            if index < len(flags) and flags[index]:
                # A leaf that requires grad, keeping the layout it came with.
                value = value.detach().requires_grad_(True)
            args[index] = value
    return args


def _double(
    function_class: type[torch.autograd.Function],
    args: list[Any],
    upstream: list[torch.Tensor],
    vector: list[torch.Tensor],
) -> list[torch.Tensor | None]:
    """d<grads, vector>/d inputs, through the learner's backward (second order)."""
    result = function_class.apply(*args)  # type: ignore[no-untyped-call]
    outputs = result if isinstance(result, tuple | list) else (result,)
    inputs = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
    grads = torch.autograd.grad(outputs, inputs, upstream, create_graph=True, allow_unused=True)
    pairs = [
        (g, v) for g, v in zip(grads, vector, strict=True) if g is not None and g.requires_grad
    ]
    if not pairs:
        return [None for _ in inputs]
    total = torch.stack([(g * v).sum() for g, v in pairs]).sum()
    return list(torch.autograd.grad(total, inputs, allow_unused=True))


def _advice(ctx: Any) -> dict[str, Any]:
    """What forward kept for backward: for notes that never fail a check."""
    try:
        saved = list(ctx.saved_tensors)
    except RuntimeError:
        saved = []
    attributes = sorted(k for k, v in vars(ctx).items() if isinstance(v, torch.Tensor))
    return {
        "saved_count": len(saved),
        "saved_bytes": sum(t.numel() * t.element_size() for t in saved if t is not None),
        "tensor_attributes": attributes,
    }


def limit_memory(megabytes: int | None) -> None:
    """Cap the address space: a runaway allocation fails here, it does not freeze the machine.

    The cap is what the process already maps (torch is large) plus ``megabytes``.
    """
    if not megabytes:
        return
    import resource

    try:
        with open("/proc/self/statm") as statm:
            mapped = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return  # not Linux: no cap
    cap = mapped + megabytes * 1024 * 1024
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))


def serve(exercise: Exercise, source: str, path: Path, requests: int, replies: int) -> None:
    """Answer requests until the checker closes the pipe; never returns."""
    server = _Server(exercise, source, path)
    code = 0
    try:
        while True:
            try:
                request, blobs = wire.receive(requests)
            except wire.PeerGone:
                break
            reply, reply_blobs = server.handle(request, blobs)
            wire.send(replies, reply, reply_blobs)
    except BaseException:  # nothing may escape into the checker's forked code
        code = 3
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:  # the learner may have replaced or closed them
            pass
        os._exit(code)
