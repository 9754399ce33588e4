"""The reference's gradient at each layer of a spec's chain (``intermediates:``).

Forward is evaluated as the chain the spec writes, layer by layer in forward order
(the last declared first), each layer's value a tensor whose gradient autograd
keeps; the output expression then gives forward's outputs, and one backward pass
with the run's upstream gradients gives the gradient at every layer. Computed here,
in the checker, with the plan: the learner's process never sees any of it.
"""

from __future__ import annotations

import builtins
import functools
import math
import types
from collections.abc import Sequence

import torch
import torch.nn.functional as F

from trainer.spec import Chain, Exercise

_ENV = {"torch": torch, "F": F, "math": math, "__builtins__": builtins}


@functools.lru_cache(maxsize=256)
def compiled_expression(expression: str) -> types.CodeType:
    """A spec's expression, compiled once: the catalogue's 65 plans evaluate references
    ~40,000 times, and eval of the text compiled it each time (7.8 s of plans, 5.9 s
    compiled once)."""
    return compile(expression, "<string>", "eval")


def layer_gradients(
    exercise: Exercise,
    chain: Chain,
    args: Sequence[object],
    upstream: Sequence[torch.Tensor],
    expected_outputs: Sequence[torch.Tensor],
    expected_grads: dict[str, torch.Tensor] | None,
) -> tuple[torch.Tensor, ...]:
    """The gradient at each layer, in the chain's (backward) order. A ValueError when the
    chain does not compute the reference (its outputs, or with ``expected_grads`` its
    inputs' gradients, differ): the spec's fault, said as such before any check runs."""
    local: dict[str, object] = {}
    for param, arg in zip(exercise.parameters, args, strict=True):
        if isinstance(arg, torch.Tensor) and param.name in chain.feeds:
            arg = arg.detach().clone().requires_grad_(True)
        local[param.name] = arg
    values: list[torch.Tensor] = []
    for layer in reversed(chain.layers):
        value = eval(compiled_expression(layer.value), _ENV, local)
        if not isinstance(value, torch.Tensor) or not value.requires_grad:
            raise ValueError(
                f"intermediates: the layer {layer.name!r} is not a tensor of the chain"
            )
        local[layer.name] = value
        values.append(value)
    values.reverse()
    result = eval(compiled_expression(chain.output), _ENV, local)
    outputs = tuple(result) if isinstance(result, tuple | list) else (result,)
    if len(outputs) != len(expected_outputs) or not all(
        isinstance(o, torch.Tensor) and o.shape == e.shape and torch.allclose(o, e, equal_nan=True)
        for o, e in zip(outputs, expected_outputs, strict=False)
    ):
        raise ValueError("intermediates: the chain's output is not the reference's")
    floats = [(o, u) for o, u in zip(outputs, upstream, strict=True) if o.is_floating_point()]
    total = torch.stack([(o * u).sum() for o, u in floats]).sum()
    inputs = [local[name] for name in chain.feeds]
    found = torch.autograd.grad(total, [*values, *inputs], allow_unused=True)  # type: ignore[arg-type]
    grads = [
        g.detach() if g is not None else torch.zeros_like(v)
        for g, v in zip(found, [*values, *inputs], strict=True)
    ]
    for name, got in zip(chain.feeds, grads[len(values) :], strict=True):
        want = (expected_grads or {}).get(name)
        if want is not None and not torch.allclose(got, want):
            raise ValueError(
                f"intermediates: the chain's gradient for {name!r} is not the reference's"
            )
    return tuple(grads[: len(values)])
