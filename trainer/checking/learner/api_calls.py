"""The learner's side of the Function API stages: uses of the Function beyond forward/backward.

Runs in the learner's process, imported by :mod:`serve` before the learner's
file (the process cannot import the trainer's modules once it looks plain).
Each ``handle_*`` function answers one request op of a stage in
``trusted/function_api.py``, ``forward_mode.py``, ``batching.py`` or
``second_order.py``: it uses the learner's Function the way a program would
(in place on an activation, through dual tensors and ``torch.func.jvp``,
under ``torch.func.vmap`` and ``torch.func.grad``, differentiated twice) and
answers with plain data. Nothing here knows an expected value; the checker
compares.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import torch
import torch.func
from torch.autograd import forward_ad
from torch.autograd.function import FunctionCtx

from trainer.checking import protocol
from trainer.checking.learner.answers import Answer
from trainer.checking.learner.derivation import DerivationWatch
from trainer.checking.learner.loading import learner_error, own_graph, torchs
from trainer.checking.vjp import vector_jacobian


class _Server(Protocol):
    """What a handler uses of the learner process's server (serve._Server)."""

    answer: Answer | None
    path: Any
    watch: DerivationWatch


def _function_class(server: _Server) -> type[torch.autograd.Function] | None:
    """The answer's Function class: the Function API's handlers teach the class itself
    (its stages apply to that form only)."""
    return server.answer.function_class if server.answer is not None else None


def activations(args: Sequence[Any]) -> list[Any]:
    """forward's arguments as a network hands them over: a tensor that requires grad is
    the output of an earlier op, not a leaf, so an in-place forward may modify it.

    The copy keeps the strides it came with (a non-contiguous input stays so), and
    gradients flow through it to the leaf unchanged."""
    called: list[Any] = []
    for value in args:
        if not isinstance(value, torch.Tensor) or not value.requires_grad:
            called.append(value)
        elif any(s == 0 and n > 1 for s, n in zip(value.stride(), value.shape, strict=True)):
            called.append(value.clone())  # stride 0 cannot be written into
        else:
            copy = torch.empty_strided(
                value.size(), value.stride(), dtype=value.dtype, device=value.device
            )
            called.append(copy.copy_(value))
    return called


def differentiable(
    outputs: Sequence[Any], upstream: Sequence[Any]
) -> tuple[list[torch.Tensor], list[Any]]:
    """The outputs autograd differentiates (floating point), with their upstream gradients."""
    pairs = [
        (o, u)
        for o, u in zip(outputs, upstream, strict=False)
        if isinstance(o, torch.Tensor) and o.is_floating_point()
    ]
    return [o for o, _ in pairs], [u for _, u in pairs]


# -- shared ----------------------------------------------------------------------------------


def _defines(klass: type, name: str) -> bool:
    """``name`` is defined by the learner's class or its own bases, not by torch."""
    for base in klass.__mro__:
        if torchs(base.__module__):
            return False
        if name in vars(base):
            return True
    return False


def _as_list(result: object) -> list[Any]:
    return list(result) if isinstance(result, tuple | list) else [result]


def _loss(outputs: Sequence[Any], upstream: Sequence[Any]) -> torch.Tensor:
    """What a training loop backpropagates from: each float output weighted by its upstream."""
    floats, weights = differentiable(outputs, upstream)
    terms = [(o * u).sum() for o, u in zip(floats, weights, strict=True) if u is not None]
    if not terms:
        raise ValueError("no output of forward takes a gradient")
    return torch.stack(terms).sum()


def _error(server: _Server, error: BaseException, during: str) -> protocol.LearnerError:
    return protocol.LearnerError(**learner_error(error, server.path, during))


_NOT_LOADED = protocol.LearnerError("the class was not loaded")


def _recorded_forward(
    function_class: type[torch.autograd.Function], args: Sequence[Any]
) -> tuple[list[Any], FunctionCtx]:
    """forward (and setup_context) called as ``apply`` calls them, on copies of the
    arguments and a plain context object that keeps what they said:
    ``non_differentiable``, ``dirty_tensors``, ``saved_for_forward``, ``to_save``."""
    ctx = FunctionCtx()
    ctx.needs_input_grad = tuple(  # type: ignore[attr-defined]
        isinstance(a, torch.Tensor) and a.requires_grad for a in args
    )
    args = [a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args]
    forward: Callable[..., Any] = function_class.forward
    with torch.no_grad():
        if _defines(function_class, "setup_context"):
            result = forward(*args)
            function_class.setup_context(ctx, tuple(args), result)
        else:
            result = forward(ctx, *args)
    return _as_list(result), ctx


def _marked(outputs: Sequence[Any], tensors: object) -> list[bool]:
    """For each output: whether it is (by identity) among ``tensors``."""
    listed = tensors if isinstance(tensors, tuple | list) else ()
    return [any(o is t for t in listed) for o in outputs]


# -- mark_dirty ---------------------------------------------------------------------------


def handle_mark_dirty(server: _Server, request: protocol.MarkDirty) -> protocol.MarkDirtyReply:
    """One call on activations (non-leaf copies), as an in-place op is called in a network.

    Reports, per output, the input it *is* (by identity); per input, whether its
    values changed and whether autograd now takes it for the Function's output;
    and the gradient of a loss that uses the inputs *after* the call (code after an
    in-place op uses the modified tensor, whatever forward returned).
    """
    function_class = _function_class(server)
    if function_class is None:
        return protocol.MarkDirtyReply(error=_NOT_LOADED)
    args = protocol.leaves(request.args, request.requires_grad)
    upstream = protocol.listed(request.upstream)
    called = activations(args)
    before = [a.detach().clone() if isinstance(a, torch.Tensor) else None for a in called]
    try:
        applied = function_class.apply(*called)  # type: ignore[no-untyped-call]
        outputs = own_graph(_as_list(applied), function_class)
    except BaseException as error:  # the learner's code may raise anything
        return protocol.MarkDirtyReply(error=_error(server, error, "forward"))
    same = [next((i for i, a in enumerate(called) if o is a), None) for o in outputs]
    modified = [
        isinstance(a, torch.Tensor) and b is not None and not torch.equal(a.detach(), b)
        for a, b in zip(called, before, strict=True)
    ]
    rebased = [
        isinstance(a, torch.Tensor)
        and a.grad_fn is not None
        and getattr(type(a.grad_fn), "_forward_cls", None) is function_class
        for a in called
    ]
    # The tensors the program holds after the call: each modified input in place of
    # the output it should be (output k for the k-th modified input).
    held = list(outputs)
    for k, position in enumerate(i for i, m in enumerate(modified) if m):
        if k < len(held):
            held[k] = called[position]
    leaves = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
    try:
        grads = torch.autograd.grad(_loss(held, upstream), leaves, allow_unused=True)
    except BaseException as error:  # the learner's backward may raise anything
        return protocol.MarkDirtyReply(error=_error(server, error, "backward"))
    return protocol.MarkDirtyReply(same=same, modified=modified, rebased=rebased, grads=list(grads))


# -- mark_non_differentiable --------------------------------------------------------------


def handle_non_differentiable(
    server: _Server, request: protocol.NonDifferentiable
) -> protocol.NonDifferentiableReply:
    """The outputs as autograd sees them after ``apply`` (requires grad or not), which
    outputs forward marked non-differentiable, and the gradients of the differentiable
    outputs weighted by ``upstream``."""
    function_class = _function_class(server)
    if function_class is None:
        return protocol.NonDifferentiableReply(error=_NOT_LOADED)
    args = protocol.leaves(request.args, request.requires_grad)
    upstream = protocol.listed(request.upstream)
    try:
        applied = function_class.apply(*activations(args))  # type: ignore[no-untyped-call]
        outputs = own_graph(_as_list(applied), function_class)
    except BaseException as error:  # the learner's code may raise anything
        return protocol.NonDifferentiableReply(error=_error(server, error, "forward"))
    requires = [isinstance(o, torch.Tensor) and o.requires_grad for o in outputs]
    leaves = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
    grads: list[Any] = []
    if any(requires):
        used = [o if r else o.detach() for o, r in zip(outputs, requires, strict=True)]
        try:
            grads = list(torch.autograd.grad(_loss(used, upstream), leaves, allow_unused=True))
        except BaseException as error:  # the learner's backward may raise anything
            return protocol.NonDifferentiableReply(error=_error(server, error, "backward"))
    try:
        recorded, ctx = _recorded_forward(function_class, args)
    except BaseException as error:  # the learner's code may raise anything
        return protocol.NonDifferentiableReply(error=_error(server, error, "forward"))
    return protocol.NonDifferentiableReply(
        outputs=outputs,
        requires_grad=requires,
        marked=_marked(recorded, getattr(ctx, "non_differentiable", ())),
        grads=grads,
    )


# -- jvp (forward-mode AD) ----------------------------------------------------------------


def handle_jvp(server: _Server, request: protocol.Jvp) -> protocol.JvpReply:
    """Output tangents for each set of input tangents, through dual tensors
    (``torch.autograd.forward_ad``) and through ``torch.func.jvp``.

    ``tangents`` holds one list per set: a tensor or None per forward argument.
    Each route answers ``{"tangents": [...]}`` or ``{"error": ...}`` per set;
    ``torch.func.jvp`` only runs when the class defines ``setup_context``.
    """
    function_class = _function_class(server)
    if function_class is None:
        return protocol.JvpReply(error=_NOT_LOADED)
    args = protocol.listed(request.args)
    sets = [protocol.listed(s) for s in protocol.listed(request.tangents)]
    has_setup = _defines(function_class, "setup_context")
    reply = protocol.JvpReply(has_jvp=_defines(function_class, "jvp"), has_setup_context=has_setup)
    try:
        _, ctx = _recorded_forward(function_class, args)
        reply.saves_for_forward = getattr(ctx, "saved_for_forward", None) is not None
    except BaseException:  # forward parity says what is wrong with forward
        reply.saves_for_forward = False
    for tangents in sets:
        reply.dual.append(_dual_tangents(server, function_class, args, tangents))
        if has_setup:
            reply.func.append(_func_tangents(server, function_class, args, tangents))
    return reply


def _dual_tangents(
    server: _Server,
    function_class: type[torch.autograd.Function],
    args: list[Any],
    tangents: list[Any],
) -> protocol.Tangents:
    try:
        with server.watch.checkers_forward_ad(), forward_ad.dual_level():
            duals = [
                forward_ad.make_dual(a, t)  # type: ignore[no-untyped-call]
                if isinstance(t, torch.Tensor)
                else a
                for a, t in zip(args, tangents, strict=True)
            ]
            outputs = _as_list(function_class.apply(*duals))  # type: ignore[no-untyped-call]
            found = [
                forward_ad.unpack_dual(o).tangent  # type: ignore[no-untyped-call]
                if isinstance(o, torch.Tensor)
                else None
                for o in outputs
            ]
            found = [t.clone() if isinstance(t, torch.Tensor) else None for t in found]
    except BaseException as error:  # the learner's code may raise anything
        return protocol.Tangents(
            error=_jvp_error(server, error, "jvp (dual tensors)", function_class, args, tangents)
        )
    return protocol.Tangents(tangents=found)


def _func_tangents(
    server: _Server,
    function_class: type[torch.autograd.Function],
    args: list[Any],
    tangents: list[Any],
) -> protocol.Tangents:
    positions = [
        i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.is_floating_point()
    ]

    def call(*tensors: torch.Tensor) -> Any:
        merged = list(args)
        for position, tensor in zip(positions, tensors, strict=True):
            merged[position] = tensor
        return function_class.apply(*merged)  # type: ignore[no-untyped-call]

    primals = tuple(args[i] for i in positions)
    directions = tuple(
        tangents[i] if isinstance(tangents[i], torch.Tensor) else torch.zeros_like(args[i])
        for i in positions
    )
    try:
        with server.watch.checkers_forward_ad():
            found = torch.func.jvp(call, primals, directions)[1]
    except BaseException as error:  # the learner's code may raise anything
        return protocol.Tangents(
            error=_jvp_error(server, error, "torch.func.jvp", function_class, args, tangents)
        )
    return protocol.Tangents(tangents=_as_list(found))


def _jvp_error(
    server: _Server,
    error: BaseException,
    during: str,
    function_class: type[torch.autograd.Function],
    args: list[Any],
    tangents: list[Any],
) -> protocol.LearnerError:
    """The failure of a jvp route; when what jvp returns is what torch refused (a count
    or a shape), the mistake ``wrong_jvp`` with the numbers, told from the values."""
    failure = _error(server, error, during)
    refused = _jvp_refusal(function_class, args, tangents)
    if refused is not None:
        failure.mistake, failure.jvp = "wrong_jvp", refused
    return failure


def _jvp_refusal(
    function_class: type[torch.autograd.Function], args: list[Any], tangents: list[Any]
) -> dict[str, Any] | None:
    """jvp called directly, as forward-mode AD calls it (on forward's context, whose
    ``saved_tensors`` hold what forward saved for forward; zeros for a tensor input without
    a tangent, unless forward turned that off), and what it returns held to forward's
    outputs: ``{"returned": n, "outputs": m}`` for a count torch refuses,
    ``{"returned_shape": ..., "output_shape": ...}`` for a shape. None when it returns
    what torch takes, or fails itself (its own error says why)."""
    try:
        outputs, ctx = _recorded_forward(function_class, args)
        ctx.saved_tensors = tuple(getattr(ctx, "saved_for_forward", None) or ())  # type: ignore[attr-defined]
        zeros = getattr(ctx, "materialize_grads", True)
        given = [
            torch.zeros_like(a) if t is None and zeros and isinstance(a, torch.Tensor) else t
            for a, t in zip(args, tangents, strict=True)
        ]
        with torch.no_grad():
            returned = _as_list(function_class.jvp(ctx, *given))
    except BaseException:  # the learner's jvp may raise anything: then its error stands
        return None
    if len(returned) != len(outputs):
        return {"returned": len(returned), "outputs": len(outputs)}
    for tangent, output in zip(returned, outputs, strict=True):
        if (
            isinstance(tangent, torch.Tensor)
            and isinstance(output, torch.Tensor)
            and tangent.shape != output.shape
        ):
            return {"returned_shape": list(tangent.shape), "output_shape": list(output.shape)}
    return None


# -- vmap ---------------------------------------------------------------------------------


def handle_vmap(server: _Server, request: protocol.Vmap) -> protocol.VmapReply:
    """The Function over a batch with ``torch.func.vmap``.

    ``mode`` is ``forward`` (the batched outputs), ``engine`` (the batched outputs
    and the gradients of a loss weighted by ``upstream``, through autograd's engine:
    the learner's backward runs under vmap) or ``grad`` (per-sample gradients with
    ``torch.func.vmap(torch.func.grad(...))``, batched at dim 0). ``in_dims`` has
    one entry per forward argument (None for those not batched, and for non-tensors).
    """
    function_class = _function_class(server)
    if function_class is None:
        return protocol.VmapReply(error=_NOT_LOADED)
    has_setup = _defines(function_class, "setup_context")
    has_rule = bool(getattr(function_class, "generate_vmap_rule", False)) or _defines(
        function_class, "vmap"
    )
    reply = protocol.VmapReply(has_setup_context=has_setup, has_vmap_rule=has_rule)
    if not has_setup or not has_rule:
        return reply
    args = protocol.leaves(request.args, request.requires_grad)
    dims = request.in_dims
    upstream = protocol.listed(request.upstream)
    positions = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]

    def call(*tensors: torch.Tensor) -> Any:
        merged = list(args)
        for position, tensor in zip(positions, tensors, strict=True):
            merged[position] = tensor
        return function_class.apply(*merged)  # type: ignore[no-untyped-call]

    tensors = [args[i] for i in positions]
    in_dims = tuple(dims[i] for i in positions)
    mode = request.mode
    try:
        if mode == "grad":
            wanting = tuple(i for i, t in enumerate(tensors) if t.requires_grad)

            def loss(*items: torch.Tensor) -> torch.Tensor:
                count = len(tensors)
                return _loss(_as_list(call(*items[:count])), list(items[count:]))

            plain = [t.detach() for t in tensors]
            grads = torch.func.vmap(
                torch.func.grad(loss, argnums=wanting), in_dims=(*in_dims, *[0] * len(upstream))
            )(*plain, *upstream)
            reply.grads = list(grads)
            return reply
        outputs = _as_list(torch.func.vmap(call, in_dims=in_dims)(*tensors))
        reply.outputs = outputs
        if mode == "engine":
            leaves = [t for t in tensors if t.requires_grad]
            found = torch.autograd.grad(_loss(outputs, upstream), leaves, allow_unused=True)
            reply.grads = list(found)
    except BaseException as error:  # the learner's code may raise anything
        failed = _error(server, error, "torch.func.vmap")
        if not failed.mistake and _works_per_sample(call, tensors, in_dims, upstream):
            failed.mistake = "not_batchable"  # right on one sample, not batched
        return protocol.VmapReply(error=failed)
    return reply


def _works_per_sample(
    call: Callable[..., Any],
    tensors: list[torch.Tensor],
    in_dims: tuple[int | None, ...],
    upstream: list[Any],
) -> bool:
    """Whether the Function runs, forward and backward through autograd, on the batch's
    first sample without vmap: then a failure under vmap is vmap's (an op it cannot batch)."""
    sample = [
        (t.detach().select(d, 0) if d is not None else t.detach()).requires_grad_(t.requires_grad)
        for t, d in zip(tensors, in_dims, strict=True)
    ]
    try:
        outputs = _as_list(call(*sample))
        leaves = [t for t in sample if t.requires_grad]
        weights = [u[0] if isinstance(u, torch.Tensor) else u for u in upstream]
        if leaves and weights:
            torch.autograd.grad(_loss(outputs, weights), leaves, allow_unused=True)
    except BaseException:  # the learner's code fails without vmap too: its error stands
        return False
    return True


# -- second derivatives -------------------------------------------------------------------


def handle_second_order(server: _Server, request: protocol.SecondOrder) -> protocol.SecondReply:
    """d<grads, vector>/d(inputs, upstream): backward differentiated once more, as
    torch's gradgradcheck does, with respect to the inputs *and* grad_output."""
    answer = server.answer
    if answer is None:
        return protocol.SecondReply(error=_NOT_LOADED)
    args = protocol.leaves(request.args, request.requires_grad)
    upstream = [
        u.detach().requires_grad_(True)
        if isinstance(u, torch.Tensor) and u.is_floating_point()
        else u
        for u in protocol.listed(request.upstream)
    ]
    vector = protocol.listed(request.vector)
    leaves = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
    try:
        outputs = answer.own_graph(_as_list(answer.apply(*activations(args))))
        floats, weights = differentiable(outputs, upstream)
        grads = vector_jacobian(floats, leaves, weights, create_graph=True, allow_unused=True)
    except BaseException as error:  # the learner's code may raise anything
        return protocol.SecondReply(error=_error(server, error, "backward"))
    pairs = [
        (g, v) for g, v in zip(grads, vector, strict=True) if g is not None and g.requires_grad
    ]
    targets = [*leaves, *[u for u in weights if isinstance(u, torch.Tensor)]]
    if not pairs:
        return protocol.SecondReply(second=[None] * len(targets), detached=True)
    try:
        total = torch.stack([(g * v).sum() for g, v in pairs]).sum()
        second = torch.autograd.grad(total, targets, allow_unused=True, retain_graph=True)
        if all(s is None for s in second):
            # Nothing reaches the inputs: a node that refuses to be differentiated
            # (@once_differentiable) raises only when the whole graph runs.
            torch.autograd.backward(total)
    except BaseException as error:  # the learner's code may raise anything
        return protocol.SecondReply(error=_error(server, error, "double backward"))
    return protocol.SecondReply(second=list(second), detached=False)
