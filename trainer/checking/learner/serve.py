"""The learner's process: imports the scratch file and answers forward/backward calls.

A fork of the learner zygote (:mod:`trainer.checking.learner.zygote`), so it
starts from a state that never held a spec, a plan or an expected value. The
checker (another process) never runs the learner's code itself: it asks this
process to call ``forward`` or ``backward`` and gets back plain values over a
socket; every comparison and every verdict happens on the checker's side. A
learner's code that patches torch, prints fake results or searches memory only
changes its own answers.

Before the learner's file runs, :func:`run` makes the process look like a plain
``python -c`` program that imported the file (see :func:`look_plain`).
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import functools
import os
import sys
import time
import traceback
import types
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from trainer.checking import protocol, transport
from trainer.checking.learner import api_calls, counters, derivation, guard
from trainer.checking.learner.answers import Answer, find_answer, fresh_copy
from trainer.checking.learner.derivation import DerivationWatch
from trainer.checking.learner.derivation import explain as explain_derivation
from trainer.checking.learner.guard import NamespaceGuard
from trainer.checking.learner.loading import (
    Expected,
    LearnerProblem,
    import_source,
    learner_error,
    learner_traceback,
)
from trainer.checking.learner.zygote import LearnerTask
from trainer.checking.vjp import vector_jacobian
from trainer.checking.wording import changed_words, describe_exception, foreign_graph

_monotonic = time.monotonic  # kept before any learner code runs


class _Server:
    def __init__(self, exercise: Expected, source: str, path: Path) -> None:
        self.exercise = exercise
        self.source = source
        self.path = path
        self.answer: Answer | None = None  # what the file defines, once loaded
        self.module: types.ModuleType | None = None  # the file, once loaded
        # handle -> (outputs, ctx, forward's arguments)
        self.handles: dict[int, tuple[object, Any, list[Any]]] = {}
        self.next_handle = 0
        self.guard = NamespaceGuard.for_torch(guard.guarded_classes())
        self.protection_level: dict[str, Any] | None = None  # host protection, before load
        # Watches the import and every call of the class's methods, in every request,
        # until the process ends; the by_hand request reports what it saw.
        self.watch = DerivationWatch()

    def handle(
        self, header: dict[str, Any], blobs: list[bytes]
    ) -> tuple[dict[str, Any], list[bytes]]:
        """One request, as :mod:`protocol` declares it, to its handler; the reply encoded."""
        try:
            request = protocol.decode_request(header, blobs)
        except transport.WireError as error:
            return protocol.Reply(bug=f"a request this process cannot read: {error}").encode()
        self.watch.hold()
        try:
            reply = request.handle(self)
        except Exception as error:  # the learner's doing, or a bug of ours: _failed tells
            reply = self._failed(error, request.reply)
        reply.patched = sorted({*reply.patched, *self.guard.restore()})
        try:
            return reply.encode()
        except Exception as error:  # a returned value that cannot be sent back
            return self._failed(error, request.reply).encode()

    def _failed(self, error: Exception, kind: type[protocol.Reply]) -> protocol.Reply:
        """The reply for an exception that escaped a handler. It is the learner's when it
        was raised through a frame of the learner's file (a method of a returned object,
        say) or while the learner's code had patched torch; otherwise it is a bug of
        ours, and the reply carries its traceback (this process may not write files)."""
        patched = self.guard.restore()
        if patched or learner_traceback(error, self.path):
            message = f"what your code returned could not be read ({describe_exception(error)})"
            failure = protocol.LearnerError(message, learner_traceback(error, self.path))
            return kind(error=failure, patched=patched)
        return kind(bug=bug_traceback(error))

    # -- the handlers (protocol.LearnerSide) -----------------------------------------------

    def failed(self, error: BaseException, during: str) -> protocol.LearnerError:
        return learner_failure(error, self.path, during)

    def protection(self, request: protocol.Protection) -> protocol.ProtectionReply:
        return protocol.ProtectionReply(protection=self.protection_level)

    def reset(self, request: protocol.Reset) -> protocol.Reply:
        self.handles.clear()
        return protocol.Reply()

    def load(self, request: protocol.Load) -> protocol.LoadReply:
        reply = protocol.LoadReply(protection=self.protection_level)
        if not self.watch.started:
            self.watch.start()
        module = None
        try:
            with self.watch.importing():
                module = import_source(self.source, self.path)
            self.answer = find_answer(module, self.exercise, self.path)
            self.answer.watch_with(self.watch)
            self.module = module
        except LearnerProblem as problem:
            reply.problem = protocol.LearnerError(problem.message, problem.details)
        else:
            reply.optional_inputs = self.answer.optional_inputs()
        self.watch.see_source(self.source, module)
        return reply

    def forward(self, request: protocol.Forward) -> protocol.ForwardReply:
        answer = self.answer
        if answer is None:
            return protocol.ForwardReply(error=NOT_LOADED)
        args = _arguments(request.args, request.requires_grad, request.device)
        called = api_calls.activations(args)
        versions = [
            (i, a, _version(a)) for i, a in enumerate(called) if isinstance(a, torch.Tensor)
        ]
        try:
            result = answer.apply(*called)
        except BaseException as error:  # the learner's code may raise anything
            return protocol.ForwardReply(error=learner_failure(error, self.path, "forward"))
        outputs = result if isinstance(result, tuple | list) else (result,)
        changed = _changed_inputs(versions, outputs, self.exercise.param_names)
        if changed:
            return protocol.ForwardReply(error=_changed_in_place(changed))
        reply = protocol.ForwardReply(outputs=result)
        tensors = [o for o in outputs if isinstance(o, torch.Tensor)]
        ctx = next((t.grad_fn for t in tensors if t.grad_fn is not None), None)
        if any(request.requires_grad):
            if ctx is None:
                reply.no_graph = True
            elif not answer.owns(ctx):
                reply.foreign_graph = True
            elif request.keep:
                self.next_handle += 1
                self.handles[self.next_handle] = (result, ctx, called)
                reply.handle = self.next_handle
                reply.advice = _advice(ctx)
        return reply

    def double(self, request: protocol.Double) -> protocol.SecondReply:
        answer = self.answer
        if answer is None:
            return protocol.SecondReply(error=NOT_LOADED)
        args = _arguments(request.args, request.requires_grad)
        try:
            second = _double(
                answer, args, protocol.listed(request.upstream), protocol.listed(request.vector)
            )
        except BaseException as error:  # the learner's code may raise anything
            return protocol.SecondReply(error=learner_failure(error, self.path, "double backward"))
        return protocol.SecondReply(second=second)

    def train(self, request: protocol.Train) -> protocol.TrainReply:
        """The Function used as a training loop uses it, through autograd's own engine.

        ``sets`` are calls (arguments, flags, upstream gradients); ``scenario`` says
        how they are combined. The reply holds the gradients of the inputs that
        require grad: one list per call (``repeat``, ``one_graph``), per backward
        pass (``retain_graph``), the accumulated ``.grad`` (``accumulate``), or per
        output used alone (``some_outputs``).
        """
        answer = self.answer
        if answer is None:
            return protocol.TrainReply(error=NOT_LOADED)
        if request.fresh:
            # A fresh copy of the file (module, class, globals: no state of earlier
            # calls), to tell a formula that is wrong for these inputs from kept state.
            try:
                with self.watch.importing(), fresh_copy(self.exercise):  # watched as before
                    module = import_source(self.source, self.path)
                answer = find_answer(module, self.exercise, self.path)
            except LearnerProblem as problem:
                return protocol.TrainReply(
                    error=protocol.LearnerError(problem.message, problem.details)
                )
            answer.watch_with(self.watch, also=True)
        sets = [
            (_arguments(item.args, item.requires_grad), protocol.listed(item.upstream))
            for item in request.sets
        ]
        order = request.order if request.order is not None else list(range(len(sets)))
        if request.scenario == "later":
            return self._later(answer, sets[0])
        try:
            with self.watch.counted() as own_pass:
                result = _train(
                    answer,
                    request.scenario,
                    sets,
                    order,
                    request.budget,
                    request.shared,
                    own_pass,
                    self.exercise.param_names,
                )
        except _CallerTensorsChanged as changed:
            return protocol.TrainReply(
                error=protocol.LearnerError(
                    changed_words(changed.names), mistake="changes_caller_tensors"
                )
            )
        except BaseException as error:  # the learner's code may raise anything
            return protocol.TrainReply(error=learner_failure(error, self.path, "backward"))
        stacked = _stacked(result)
        if stacked is not None:
            return protocol.TrainReply(stacked=stacked, calls=len(result))
        return protocol.TrainReply(grads=result)

    def _later(self, answer: Answer, call: tuple[list[Any], list[Any]]) -> protocol.TrainReply:
        """One call, then the counters it moved (see :mod:`counters`) moved a billion
        calls ahead and one more call: its gradients, and where the counters are. No
        counter moved: no gradients. Where the learner's code fails only with its
        counters that far ahead (a ring's index moved out of its ring raises), there is
        nothing to compare: training never puts it there."""
        args, upstream = call
        classes = (answer.function_class,) if answer.function_class is not None else ()

        def run(own_pass: Callable[[], None]) -> list[Any]:
            fresh, leaves = _fresh(args)
            loss = _loss(_outputs(answer, fresh), upstream)
            own_pass()
            return list(torch.autograd.grad(loss, leaves, allow_unused=True))

        try:
            with self.watch.counted() as own_pass:
                before = counters.ints(self.module, classes)
                run(own_pass)
                far = counters.moved(before, counters.ints(self.module, classes))
        except BaseException as error:  # the learner's code may raise anything
            return protocol.TrainReply(error=learner_failure(error, self.path, "backward"))
        if not far:
            return protocol.TrainReply(grads=[])
        try:
            for counter, value in far:
                counter.put(value)
            with self.watch.counted() as own_pass:
                grads = run(own_pass)
        except BaseException:  # only that far ahead: no verdict (see above)
            return protocol.TrainReply(grads=[])
        finally:
            for counter, _ in far:
                with contextlib.suppress(BaseException):  # a container the file froze
                    counter.put(counter.value)
        return protocol.TrainReply(grads=[grads], moved=[c.name for c, _ in far])

    def by_hand(self, request: protocol.ByHand) -> protocol.ByHandReply:
        """One more forward and backward as autograd's engine runs them, and one backward
        called directly; then everything the watch saw since the file was imported:
        the import, and every call of the class's methods in every request."""
        answer = self.answer
        if answer is None:
            return protocol.ByHandReply(error=NOT_LOADED)
        args = _arguments(request.args, request.requires_grad)
        upstream = protocol.listed(request.upstream)
        try:
            for style in ("engine", "direct"):
                fresh, leaves = _fresh(args)
                outputs = _outputs(answer, fresh)
                if style == "engine":
                    torch.autograd.grad(_loss(outputs, upstream), leaves, allow_unused=True)
                else:
                    node = next(o.grad_fn for o in outputs if o.grad_fn is not None)
                    answer.call_backward(node, upstream)
        except BaseException as error:  # the learner's code may raise anything
            return protocol.ByHandReply(error=learner_failure(error, self.path, "backward"))
        self.watch.hold()  # what these calls removed counts too
        findings = self.watch.findings
        if not findings:
            return protocol.ByHandReply()
        message, details = explain_derivation(findings)
        return protocol.ByHandReply(
            findings=sorted({f.call for f in findings}), message=message, details=details
        )

    def backward(self, request: protocol.Backward) -> protocol.BackwardReply:
        answer = self.answer
        stored = self.handles.get(request.handle_id)
        if answer is None or stored is None:
            return protocol.BackwardReply(
                error=protocol.LearnerError("no forward call to take the backward of")
            )
        result, ctx, called = stored
        grads = protocol.listed(request.grads)
        if request.device != "cpu":
            grads = [g.to(request.device) if isinstance(g, torch.Tensor) else g for g in grads]
        if not answer.owns(ctx):  # changed since forward returned
            return protocol.BackwardReply(error=protocol.LearnerError(foreign_graph(answer.name)))
        before = [g.clone() if isinstance(g, torch.Tensor) else None for g in grads]
        # What the caller holds: forward's inputs and outputs, which backward must leave
        # as they are (an in-place op through `.data` moves no version counter).
        outputs = list(result) if isinstance(result, tuple | list) else [result]
        held = _held_tensors(called, outputs, self.exercise.param_names)
        try:
            # As autograd's engine calls it: through the node's own `apply` (which
            # also takes `vjp`, backward's alias), with grad mode off.
            result = answer.call_backward(ctx, grads)
        except BaseException as error:  # the learner's code may raise anything
            return protocol.BackwardReply(error=learner_failure(error, self.path, "backward"))
        modified = [
            i
            for i, (g, b) in enumerate(zip(grads, before, strict=True))
            if isinstance(g, torch.Tensor) and b is not None and not torch.equal(g, b)
        ]
        changed = [name for name, tensor, copy in held if not _same_values(tensor, copy)]
        return protocol.BackwardReply(result=result, modified=modified, changed=changed)

    def mark_dirty(self, request: protocol.MarkDirty) -> protocol.MarkDirtyReply:
        return api_calls.handle_mark_dirty(self, request)

    def non_differentiable(
        self, request: protocol.NonDifferentiable
    ) -> protocol.NonDifferentiableReply:
        return api_calls.handle_non_differentiable(self, request)

    def jvp(self, request: protocol.Jvp) -> protocol.JvpReply:
        return api_calls.handle_jvp(self, request)

    def vmap(self, request: protocol.Vmap) -> protocol.VmapReply:
        return api_calls.handle_vmap(self, request)

    def second_order(self, request: protocol.SecondOrder) -> protocol.SecondReply:
        return api_calls.handle_second_order(self, request)


NOT_LOADED = protocol.LearnerError("the class was not loaded")


def bug_traceback(error: BaseException) -> str:
    """A traceback of a bug of ours in this process, for the checker to keep. Our code
    here reads as ``<string>`` (:func:`look_plain`): each frame is named by its
    function's qualified name (``_Server.forward``) and line instead."""
    lines = ["Traceback (most recent call last), in the learner's process:"]
    for frame, line in traceback.walk_tb(error.__traceback__):
        code = frame.f_code
        name = getattr(code, "co_qualname", code.co_name)  # Python 3.11+
        lines.append(f"  {name}, line {line} of {code.co_filename}")
    lines += traceback.format_exception_only(error)
    return "\n".join(line.rstrip("\n") for line in lines)


def learner_failure(error: BaseException, path: Path, during: str) -> protocol.LearnerError:
    """What the learner reads when its code raised ``error`` ``during`` a call, with the
    mistake's id when the exception says which (the checker reads the id, never words)."""
    return protocol.LearnerError(**learner_error(error, path, during))


def _changed_inputs(
    versions: list[tuple[int, torch.Tensor, int | None]], outputs: Any, names: tuple[str, ...]
) -> list[str]:
    """The inputs forward changed in place (their version counter moved) without giving
    them back as outputs, as an in-place Function does (``ctx.mark_dirty(x); return x``).
    An input given back unmarked comes back as a view of itself: the mark_dirty stage
    names that mistake."""
    returned = {_memory(o) for o in outputs if isinstance(o, torch.Tensor)}
    return [
        names[index] if index < len(names) else f"argument {index + 1}"
        for index, tensor, version in versions
        if version is not None and _version(tensor) != version and _memory(tensor) not in returned
    ]


def _held_tensors(
    called: list[Any], outputs: list[Any], names: tuple[str, ...]
) -> list[tuple[str, torch.Tensor, torch.Tensor]]:
    """Forward's tensor inputs and outputs, named, each with a copy of its values now."""
    named = [
        (f"`{names[i]}`" if i < len(names) else f"argument {i + 1}", a)
        for i, a in enumerate(called)
    ]
    named += [
        (f"forward's output{f' {i + 1}' if len(outputs) > 1 else ''}", o)
        for i, o in enumerate(outputs)
    ]
    with torch.no_grad():
        return [(n, t, t.detach().clone()) for n, t in named if isinstance(t, torch.Tensor)]


def _same_values(tensor: torch.Tensor, copy: torch.Tensor) -> bool:
    """Whether ``tensor`` still holds ``copy``'s values (NaN where NaN was)."""
    with torch.no_grad():
        now = tensor.detach()
        if now.shape != copy.shape or now.dtype != copy.dtype:
            return False
        same = torch.equal(now, copy)
        if same or not now.is_floating_point():
            return same
        return bool(((now == copy) | (now.isnan() & copy.isnan())).all())


def _version(tensor: torch.Tensor) -> int | None:
    """The tensor's version counter (None where it keeps none: an inference tensor)."""
    try:
        return int(tensor._version)
    except (RuntimeError, AttributeError):
        return None


def _memory(tensor: torch.Tensor) -> int:
    try:
        return int(tensor.untyped_storage().data_ptr())
    except (RuntimeError, NotImplementedError):  # no storage (a subclass, a meta tensor)
        return id(tensor)


def _changed_in_place(names: list[str]) -> protocol.LearnerError:
    listed = ", ".join(f"`{n}`" for n in names)
    return protocol.LearnerError(
        f"forward changed its input {listed} in place and did not return it: the caller's "
        "tensor is no longer what it passed (logits reused by a residual connection or a "
        "second loss would be wrong, and so would their gradients)",
        [
            "Compute on new tensors (x = x - m, not x.sub_(m)). An in-place Function "
            "marks what it changes and returns it: ctx.mark_dirty(x); return x."
        ],
    )


def _arguments(args_value: object, flags: list[bool], device: str = "cpu") -> list[Any]:
    """forward's arguments: on the requested device, leaves requiring grad as flagged."""
    args = protocol.listed(args_value)
    for index, value in enumerate(args):
        if isinstance(value, torch.Tensor):
            if device != "cpu":
                value = value.to(device)
            if index < len(flags) and flags[index]:
                # A leaf that requires grad, keeping the layout it came with.
                value = value.detach().requires_grad_(True)
            args[index] = value
    return args


def _fresh(args: list[Any]) -> tuple[list[Any], list[torch.Tensor]]:
    """Copies of the arguments for one call, and the leaves among them that require grad."""
    fresh = [
        a.detach().clone().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) else a
        for a in args
    ]
    return fresh, [a for a in fresh if isinstance(a, torch.Tensor) and a.requires_grad]


def _outputs(answer: Answer, args: list[Any], called: list[Any] | None = None) -> list[Any]:
    """forward's outputs through ``apply`` (of ``called``, forward's very arguments, when
    given; else of the activations of ``args``); a graph that is not the answer's own is
    refused, as in the forward request."""
    if called is None:
        called = api_calls.activations(args)
    result = answer.apply(*called)
    return answer.own_graph(list(result) if isinstance(result, tuple | list) else [result])


def _loss(outputs: list[Any], upstream: list[Any]) -> torch.Tensor:
    """What a training loop backpropagates from: each output weighted by its upstream."""
    terms = [
        (o * u).sum()
        for o, u in zip(outputs, upstream, strict=False)
        if isinstance(u, torch.Tensor)
    ]
    return torch.stack(terms).sum()


class _CallerTensorsChanged(Exception):
    """Backward, run by autograd's engine, changed forward's inputs or outputs (named)."""

    def __init__(self, names: list[str]) -> None:
        super().__init__(", ".join(names))
        self.names = names


def _train(
    answer: Answer,
    scenario: str,
    sets: list[tuple[list[Any], list[Any]]],
    order: list[int],
    budget: float = 3.0,
    shared: list[int] | None = None,
    own_pass: Callable[[], None] = lambda: None,
    names: tuple[str, ...] = (),
) -> list[list[torch.Tensor | None]]:
    """``own_pass`` is called before each backward pass this code runs itself (the
    derivation watch counts the passes it did not run)."""

    def grads(loss: torch.Tensor, leaves: list[torch.Tensor], retain: bool = False) -> list[Any]:
        own_pass()
        return list(torch.autograd.grad(loss, leaves, allow_unused=True, retain_graph=retain))

    if scenario == "repeat":
        # A slow but right backward must not time out: after `budget` seconds the
        # calls made so far are the answer.
        results: list[list[Any]] = []
        started = _monotonic()
        for index in order:
            if results and _monotonic() - started > budget:
                break
            args, upstream = sets[index]
            fresh, leaves = _fresh(args)
            results.append(grads(_loss(_outputs(answer, fresh), upstream), leaves))
        return results
    if scenario == "one_graph":
        calls = [(_fresh(args), upstream) for args, upstream in sets]
        called = [api_calls.activations(fresh) for (fresh, _), _ in calls]
        outputs = [
            _outputs(answer, fresh, arguments)
            for ((fresh, _), _), arguments in zip(calls, called, strict=True)
        ]
        # What each call's caller holds, as the engine's backward must leave it (the
        # direct backward request compares the same; a backward may tell the two apart).
        held = [h for c, o in zip(called, outputs, strict=True) for h in _held_tensors(c, o, names)]
        loss = torch.stack([_loss(o, u) for o, (_, u) in zip(outputs, calls, strict=True)]).sum()
        leaves = [leaf for (_, call_leaves), _ in calls for leaf in call_leaves]
        flat = grads(loss, leaves)
        changed = list(dict.fromkeys(n for n, t, copy in held if not _same_values(t, copy)))
        if changed:
            raise _CallerTensorsChanged(changed)
        results, start = [], 0
        for (_, call_leaves), _ in calls:
            results.append(flat[start : start + len(call_leaves)])
            start += len(call_leaves)
        return results
    if scenario == "retain_graph":
        (args, _), *_ = sets
        fresh, leaves = _fresh(args)
        outputs = _outputs(answer, fresh)
        first = grads(_loss(outputs, sets[0][1]), leaves, retain=True)
        return [first, grads(_loss(outputs, sets[1][1]), leaves)]
    if scenario == "accumulate":
        (args, _), *_ = sets
        fresh, leaves = _fresh(args)
        for _, upstream in sets:
            loss = _loss(_outputs(answer, fresh), upstream)
            own_pass()
            torch.autograd.backward(loss)
        return [[leaf.grad for leaf in leaves]]
    if scenario == "shared":
        # The second call uses the first call's tensors at `shared` (tied weights): one
        # graph, one backward pass; the shared leaves' gradients sum both uses.
        # Both calls get the very same tensor object there, as a network's Parameter is.
        (args1, upstream1), (args2, upstream2) = sets[0], sets[1]
        fresh1, leaves1 = _fresh(args1)
        fresh2, _ = _fresh(args2)
        at = set(shared or [])
        called1, called2 = api_calls.activations(fresh1), api_calls.activations(fresh2)
        for index in at:
            fresh2[index] = fresh1[index]
            called1[index] = called2[index] = fresh1[index]
        leaves2 = [
            a
            for index, a in enumerate(fresh2)
            if index not in at and isinstance(a, torch.Tensor) and a.requires_grad
        ]
        loss = _loss(_outputs(answer, fresh1, called1), upstream1) + _loss(
            _outputs(answer, fresh2, called2), upstream2
        )
        flat = grads(loss, leaves1 + leaves2)
        return [flat[: len(leaves1)], flat[len(leaves1) :]]
    if scenario == "update_in_place":
        # Two steps on the very same tensors, their values changed in place between them
        # as an optimizer's step changes a Parameter: the parameters (``shared``) go in as
        # the leaves themselves, as a network passes them.
        (first_args, _), (second_args, _) = sets[0], sets[1]
        fresh, leaves = _fresh(first_args)
        at = set(shared or [])
        results = []
        for step, (_, upstream) in enumerate(sets[:2]):
            if step:
                with torch.no_grad():
                    for index, value in enumerate(second_args):
                        held = fresh[index]
                        if isinstance(value, torch.Tensor) and isinstance(held, torch.Tensor):
                            held.copy_(value)
            called = api_calls.activations(fresh)
            for index in at:
                called[index] = fresh[index]
            results.append(grads(_loss(_outputs(answer, fresh, called), upstream), leaves))
        return results
    if scenario == "some_outputs":
        results = []
        for args, upstream in sets:
            fresh, leaves = _fresh(args)
            outputs = _outputs(answer, fresh)
            used = [o for o, u in zip(outputs, upstream, strict=False) if u is not None]
            weights = [u for u in upstream if u is not None]
            results.append(grads(_loss(used, weights), leaves))
        return results
    raise ValueError(f"unknown scenario {scenario!r}")


def _stacked(calls: list[list[Any]]) -> list[torch.Tensor] | None:
    """The gradients of many calls as one tensor per input, stacked along a first
    dimension of calls, when every call gave a plain dense CPU tensor of one shape and
    dtype for that input: a few blobs instead of hundreds (the 500 calls in a row).
    None when they differ: then each value travels as it is."""
    if len(calls) < 2 or len({len(grads) for grads in calls}) != 1:
        return None
    stacked = []
    for column in zip(*calls, strict=True):
        first = column[0]
        if not all(
            type(g) is torch.Tensor
            and g.layout == torch.strided
            and g.device.type == "cpu"
            and g.shape == first.shape
            and g.dtype == first.dtype
            for g in column
        ):
            return None
        stacked.append(torch.stack([g.detach() for g in column]))
    return stacked


def _double(
    answer: Answer,
    args: list[Any],
    upstream: list[torch.Tensor],
    vector: list[torch.Tensor],
) -> list[torch.Tensor | None]:
    """d<grads, vector>/d inputs, through the learner's backward (second order)."""
    outputs, upstream = api_calls.differentiable(_outputs(answer, args), upstream)
    inputs = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
    grads = vector_jacobian(outputs, inputs, upstream, create_graph=True, allow_unused=True)
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


def _renamed(code: types.CodeType) -> types.CodeType:
    """``code`` as if compiled from ``<string>``."""
    consts = tuple(_renamed(c) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    return code.replace(co_filename="<string>", co_consts=consts)


# Whether the zygote has renamed the trainer's code and classes (see look_plain). Done
# once there and inherited: in each learner process it would touch, and so copy from
# the zygote, every function and class of ours (~1,200 pages, ~5 ms a check).
_RENAMED: list[bool] = []


def _found_from(
    names: set[str],
) -> tuple[list[type], list[types.FunctionType], list[Any]]:
    """Every class, function and cache wrapper of the modules ``names``, wherever it is
    bound: in a module or a class, behind a property, a cache, a static or class method,
    a partial or a dataclass field, in a container, a closure, a default or an instance
    of ours, a subclass made at run time, and the array and pointer classes ctypes made
    of ours (which only ctypes' own caches hold).

    Walked from the modules, not found among all of gc's objects: the zygote's walk of
    ~250,000 objects took ~50 ms on the way to the first check, and wrote to (so
    copied) every page of them."""
    cached = type(functools.cache(len))
    classes: list[type] = []
    functions: list[types.FunctionType] = []
    wrappers: list[Any] = []
    seen: set[int] = set()
    pending: list[object] = [vars(sys.modules[n]) for n in names if n in sys.modules]
    # The classes ctypes makes of ours (``X * 2``, ``POINTER(X)``) no module holds.
    pending.extend([*ctypes.Array.__subclasses__(), *ctypes._Pointer.__subclasses__()])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        while pending:
            found = pending.pop()
            if id(found) in seen:
                continue
            seen.add(id(found))
            if isinstance(found, type):
                if found.__module__ in names:
                    classes.append(found)
                    pending.extend(vars(found).values())
                    pending.extend(found.__subclasses__())  # made at run time, say
            elif isinstance(found, types.FunctionType):
                if found.__module__ in names:
                    functions.append(found)
                    pending.extend(found.__defaults__ or ())
                    pending.extend((found.__kwdefaults__ or {}).values())
                    pending.extend(_cell_values(found.__closure__ or ()))
                    pending.extend(vars(found).values())  # __wrapped__, say
            elif isinstance(found, cached):
                if getattr(found, "__module__", None) in names:
                    wrappers.append(found)
                    pending.append(found.__wrapped__)
            elif isinstance(found, staticmethod | classmethod):
                pending.append(found.__func__)
            elif isinstance(found, functools.cached_property):
                pending.append(found.func)
            elif isinstance(found, property):
                pending.extend((found.fget, found.fset, found.fdel))
            elif isinstance(found, functools.partial):
                pending.extend((found.func, *found.args, *found.keywords.values()))
            elif isinstance(found, dict):
                pending.extend(found.values())
            elif isinstance(found, list | tuple | set | frozenset):
                pending.extend(found)
            elif isinstance(found, dataclasses.Field):
                pending.extend((found.default, found.default_factory))
            elif type(found).__module__ in names:  # an instance of ours: what it holds
                pending.extend(getattr(found, "__dict__", {}).values())
    return classes, functions, wrappers


def _cell_values(cells: tuple[types.CellType, ...]) -> list[object]:
    values = []
    for cell in cells:
        with contextlib.suppress(ValueError):  # an empty cell
            values.append(cell.cell_contents)
    return values


def prepare_to_look_plain() -> None:
    """In the zygote, before any learner process: rename every function and class of
    the trainer as :func:`look_plain` describes. The zygote runs on unchanged: only
    names, file names and docstrings change, not what the code does."""
    if _RENAMED:
        return
    names = set(_trainers_modules())
    classes, functions, wrappers = _found_from(names)
    for function in functions:
        function.__code__ = _renamed(function.__code__)
        function.__module__ = "__main__"
        function.__doc__ = None
    for wrapper in wrappers:
        wrapper.__module__ = "__main__"
        wrapper.__doc__ = None
    for klass in classes:
        klass.__module__ = "__main__"
    _RENAMED.append(True)
    _OURS[:] = [guard.dict_version(sys.modules), sorted(names)]
    # torch's mode switches report the learner's use, not ours (renamed code included).
    derivation.watch_mode_switches(functions)


# sys.modules's version tag (guard.dict_version) when the zygote listed the trainer's
# modules in it, and that list.
_OURS: list[Any] = []


def list_our_modules() -> None:
    """In the zygote, before it forks a learner process: the trainer's modules as
    ``sys.modules`` holds them now, when an import here has changed it since they were
    last listed (a module torch imports on first use, a check's ``imports``). Else
    every learner process forked after it goes through the ~2,500 names itself."""
    version = guard.dict_version(sys.modules)
    if not _OURS or version is None or version == _OURS[0]:
        return  # not listed yet (prepare_to_look_plain does), or still as listed
    names = sorted(_trainers_modules())
    _OURS[:] = [version, names]


def _trainers_modules() -> list[str]:
    """The trainer's modules in ``sys.modules``, found by going through all its names."""
    return [n for n in sys.modules if n == "trainer" or n.startswith("trainer.")]


def _our_modules() -> list[str]:
    """The trainer's modules in ``sys.modules``: the zygote's list while ``sys.modules``
    has not changed since (its version tag), else found again. Going through its ~2,500
    names in each learner process would touch, and so copy, every name's page."""
    if _OURS:
        version, names = _OURS
        if version is not None and version == guard.dict_version(sys.modules):
            return list(names)
    return _trainers_modules()


def look_plain() -> None:
    """Make the process look like ``python -c`` that imported the learner's file.

    The trainer's modules leave ``sys.modules`` and ``sys.path``; the ones still
    running here (this one, the zygote, the transport) are renamed ``__main__``
    with code from ``<string>``, so neither a module search nor the call stack
    names the checker. The environment is the CLI's own but for the trainer's own
    settings, and the command line is the server's ``python -c``. Objects of ours
    remain reachable through ``gc``; none holds anything about the expected results.
    """
    prepare_to_look_plain()  # done in the zygote: nothing left to do here
    names = _our_modules()
    modules = [sys.modules.pop(n) for n in names]
    for module in modules:
        for attribute in ("__file__", "__cached__", "__path__"):
            vars(module).pop(attribute, None)
        module.__name__ = "__main__"
        module.__doc__ = None
        module.__spec__ = None
        module.__loader__ = None
        module.__package__ = ""
    del sys.path[0]  # the package root the server's bootstrap put first
    sys.argv = ["-c"]
    # The trainer's own settings (TRAINER_WORKSPACE, TRAINER_EXERCISES, ...) are the
    # checker's business: an instructor's would tell a submission it is being graded.
    for name in [n for n in os.environ if "TRAINER" in n.upper()]:
        del os.environ[name]


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            if stream is not None:
                stream.flush()
        except BaseException:  # the learner may have replaced or closed them
            pass


def run(task: LearnerTask) -> None:
    """Answer the checker's calls until it closes the socket; never returns.

    Called from the server's bootstrap, once :func:`look_plain` has run: no
    frame of the trainer's own files lies below the learner's code."""
    learner = task.learner
    path = Path(learner.file or "solution.py")
    expected = Expected(
        class_name=learner.class_name,
        param_names=tuple(learner.param_names),
        outputs=learner.outputs,
        form=learner.form,
    )
    source = learner.source
    os.chdir(learner.cwd or str(path.parent))
    server = _Server(expected, source, path)
    server.protection_level = task.protection.to_dict() if task.protection else None
    code = 0
    try:
        while True:
            try:
                request, blobs = transport.receive(task.fd)
            except transport.PeerGone:
                break
            reply, reply_blobs = server.handle(request, blobs)
            _flush()  # what this call printed reaches the output before the next stage's mark
            try:
                transport.send(task.fd, reply, reply_blobs)
            except (TypeError, ValueError) as error:  # a reply that is not JSON: its handler's bug
                transport.send(task.fd, *protocol.Reply(bug=bug_traceback(error)).encode())
    except BaseException:  # nothing may escape: end quietly, the checker sees it
        code = 3
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:  # the learner may have replaced or closed them
            pass
        os._exit(code)
