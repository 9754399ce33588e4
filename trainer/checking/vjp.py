"""Vector-Jacobian products through autograd's engine, without importing sympy.

``torch.autograd.grad(outputs, inputs, grad_outputs)`` checks each ``grad_output``
against its output with ``torch.fx.experimental.symbolic_shapes``, which imports
sympy on first use: ~0.15 s, and tens of MiB, in every process that has not yet.
When every ``grad_output`` is a plain tensor of its output's shape, dtype, device
and layout, that check has nothing to say: autograd's engine runs directly, as
``torch.autograd.grad`` runs it, and backward gets the very same ``grad_output``
tensors. Otherwise ``torch.autograd.grad`` runs, and says what does not match.

Used on both sides: the checker's own gradients and the learner process's calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch


def vector_jacobian(
    outputs: Sequence[torch.Tensor],
    inputs: Sequence[torch.Tensor],
    upstream: Sequence[Any],
    *,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    allow_unused: bool = False,
) -> tuple[torch.Tensor | None, ...]:
    """``torch.autograd.grad(outputs, inputs, upstream, ...)``, the same numbers."""
    engine = getattr(torch.autograd.graph, "_engine_run_backward", None)  # what grad calls
    plain = (
        len(outputs) == len(upstream)
        and all(type(i) is torch.Tensor for i in inputs)
        and all(
            type(o) is torch.Tensor
            and type(u) is torch.Tensor
            and o.shape == u.shape
            and o.dtype == u.dtype
            and o.device == u.device
            and o.layout == u.layout == torch.strided
            for o, u in zip(outputs, upstream, strict=False)
        )
    )
    if engine is None or not plain or not outputs or not inputs:
        return torch.autograd.grad(
            list(outputs),
            list(inputs),
            list(upstream),
            retain_graph=retain_graph,
            create_graph=create_graph,
            allow_unused=allow_unused,
        )
    retain = create_graph if retain_graph is None else retain_graph
    found = engine(
        tuple(outputs),
        tuple(upstream),
        retain,
        create_graph,
        tuple(inputs),
        allow_unused,
        accumulate_grad=False,
    )
    return tuple(found)
