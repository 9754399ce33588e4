"""What the learner's backward returned, held to what autograd accepts, before autograd sees it.

The proxy Function's backward hands the learner's values to torch's engine,
which refuses some (a list, a wrong count, a gradient for a non-tensor, a shape
that does not sum to the input's, a complex gradient for a real input) with an
error in its own words. Those are checked here first, on the values, in the
order torch checks them, and each refusal is a mistake id with words in the
learner's terms: nothing reads torch's error text. What autograd forgives (a
broadcastable shape it sums, another real dtype it casts) is left to it, as it
is in training; the contract stage holds backward to the exact contract.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from trainer.checking.trusted.compare import describe_value, shape_text
from trainer.checking.values import Opaque


@dataclass(frozen=True)
class Input:
    """What backward's value for one forward input is held to: None for a non-tensor."""

    shape: tuple[int, ...]
    is_complex: bool

    @classmethod
    def of(cls, value: object) -> Input | None:
        if not isinstance(value, torch.Tensor):
            return None
        return cls(tuple(value.shape), value.is_complex())


@dataclass(frozen=True)
class Refusal:
    """A return autograd would refuse: which classic mistake, in words, and for which input."""

    mistake: str
    words: str
    input: str = ""


def not_a_tensor_words(value: object, where: str) -> str:
    """What to say of a value backward returned for ``where`` that is no gradient."""
    if isinstance(value, Opaque) and "torch.Tensor" in value.type_name:
        # Sparse, nested, on another device, of an odd dtype: a tensor, not the one asked.
        return (
            f"backward returned a {value.type_name} for {where}; the gradient is asked as "
            "the reference's autograd gives it, a plain tensor (dense, strided, of the "
            "input's dtype) on the input's device: return that (`.to_dense()` makes a "
            "sparse one dense)"
        )
    return (
        f"backward returned {describe_value(value)} for {where}; return a tensor "
        "(or None for an input that needs no gradient)"
    )


def refusal(
    result: object,
    inputs: Sequence[Input | None],
    needs_grad: Sequence[bool],
    names: Sequence[str],
) -> Refusal | None:
    """Why autograd would refuse ``result`` as backward's return for ``inputs`` (forward's
    arguments, named ``names``; ``needs_grad`` as ``ctx.needs_input_grad``), or None."""

    def name(index: int) -> str:
        return f"`{names[index]}`" if index < len(names) else f"input {index}"

    if isinstance(result, list):
        words = (
            f"backward returned a list of {len(result)} values: return a tuple "
            "(or a single tensor when forward has one input); autograd rejects a list"
        )
        return Refusal("not_a_tensor", words)
    values = result if isinstance(result, tuple) else (result,)
    for index, value in enumerate(values):
        if value is not None and not isinstance(value, torch.Tensor):
            where = name(index) if index < len(names) else f"position {index}"
            words = not_a_tensor_words(value, where)
            return Refusal("not_a_tensor", words, names[index] if index < len(names) else "")
    if len(values) > len(inputs) and all(v is None for v in values[len(inputs) :]):
        values = values[: len(inputs)]  # trailing Nones: autograd drops them
    if len(values) != len(inputs):
        got, expected = len(values), len(inputs)
        listed = ", ".join(f"`{n}`" for n in names)
        words = (
            f"backward returned {got} value{'s' * (got != 1)} but forward is called with "
            f"{expected} input{'s' * (expected != 1)} ({listed}): return one per input, in "
            "order, None for non-tensors"
        )
        return Refusal("wrong_count", words)
    for index, (value, expected_input) in enumerate(zip(values, inputs, strict=True)):
        if value is None:
            continue
        assert isinstance(value, torch.Tensor)
        input_name = names[index] if index < len(names) else ""
        if expected_input is None:
            words = (
                f"backward returned a gradient for {name(index)}, which is not a tensor: "
                "return None for it"
            )
            return Refusal("grad_for_non_tensor", words, input_name)
        if not needs_grad[index]:
            continue  # autograd drops it unread
        got_shape, want_shape = tuple(value.shape), expected_input.shape
        if got_shape != want_shape and not _expandable(want_shape, got_shape):
            transposed = (
                len(got_shape) >= 2
                and got_shape[:-2] == want_shape[:-2]
                and got_shape[-2:] == want_shape[-2:][::-1]
            )
            words = (
                f"grad for {name(index)} has shape {shape_text(got_shape)} but {name(index)} has "
                f"shape {shape_text(want_shape)}: "
                + ("it is transposed" if transposed else "a gradient has the shape of its input")
            )
            return Refusal("transposed" if transposed else "wrong_shape", words, input_name)
        if value.is_complex() and not expected_input.is_complex:
            words = (
                f"grad for {name(index)} is complex ({value.dtype}) but {name(index)} is real: "
                "a gradient has the dtype of its input"
            )
            return Refusal("wrong_dtype", words, input_name)
    return None


def _expandable(shape: tuple[int, ...], to: tuple[int, ...]) -> bool:
    """Whether ``shape`` broadcasts to ``to``: then autograd sums a gradient of shape
    ``to`` down to ``shape`` silently."""
    if len(shape) > len(to):
        return False
    return all(s in (t, 1) for s, t in zip(reversed(shape), reversed(to), strict=False))
