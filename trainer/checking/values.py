"""Values between the checker and the learner's process: tensors as bytes, never pickles.

The learner's process is not trusted, so nothing it sends is unpickled: every
value a learner's method returns is described (a tensor, None, a number, a
sequence, or "something else" with its type name) as JSON plus raw byte blobs
(see :mod:`trainer.checking.transport` for the framing), and rebuilt as plain
data on the other side.
"""

from __future__ import annotations

from typing import Any

import torch

from trainer.checking.transport import WireError

_DTYPES = {
    str(d): d
    for d in (
        torch.float16,
        torch.bfloat16,
        torch.float32,
        torch.float64,
        torch.int8,
        torch.int16,
        torch.int32,
        torch.int64,
        torch.uint8,
        torch.bool,
        torch.complex64,
        torch.complex128,
    )
}


def encode(value: object, blobs: list[bytes], layout: str = "plain") -> dict[str, Any]:
    """Describe ``value`` as JSON, appending tensor bytes to ``blobs``."""
    if isinstance(value, torch.Tensor):
        unsent = _unsendable(value)
        if unsent:  # no plain data to send (a meta or sparse tensor, say): what it is
            return {"t": "other", "type": unsent}
        flat = value.detach().to("cpu").reshape(-1)
        # A fresh buffer with stride 1: even a one-element stride-0 tensor can be viewed as bytes.
        data = torch.empty(flat.shape, dtype=flat.dtype).copy_(flat)
        # Bytes, whatever the dtype (numpy has no bfloat16).
        raw = data if data.dtype == torch.bool else data.view(torch.uint8)
        blobs.append(raw.numpy().tobytes() if data.numel() else b"")
        return {
            "t": "tensor",
            "dtype": str(value.dtype),
            "shape": list(value.shape),
            "device": str(value.device),
            "blob": len(blobs) - 1,
            "layout": layout,
        }
    if value is None:
        return {"t": "none"}
    if isinstance(value, bool | int | float) and type(value) in (bool, int, float):
        return {"t": "scalar", "kind": type(value).__name__, "value": value}
    if isinstance(value, tuple | list):
        return {"t": type(value).__name__, "items": [encode(v, blobs, layout) for v in value]}
    kind = type(value)
    return {"t": "other", "type": f"{kind.__module__}.{kind.__qualname__}".replace("builtins.", "")}


def _unsendable(tensor: torch.Tensor) -> str:
    """What a tensor is when it has no plain data to send ("" when it has): one off the CPU
    and CUDA, not strided (sparse), nested, or of a dtype the other side cannot rebuild."""
    if tensor.device.type not in ("cpu", "cuda"):
        return f"torch.Tensor on {tensor.device}"
    if tensor.layout != torch.strided:
        return f"torch.Tensor of layout {tensor.layout}"
    if tensor.is_nested:
        return "nested torch.Tensor"
    if str(tensor.dtype) not in _DTYPES:
        return f"torch.Tensor of dtype {tensor.dtype}"
    return ""


def decode(item: Any, blobs: list[bytes]) -> object:
    """Rebuild a value described by :func:`encode`; "other" values become :class:`Opaque`."""
    if not isinstance(item, dict):
        raise WireError("a value is not an object")
    kind = item.get("t")
    if kind == "tensor":
        return _decode_tensor(item, blobs)
    if kind == "none":
        return None
    if kind == "scalar":
        value = item.get("value")
        if type(value) not in (bool, int, float):
            raise WireError("a scalar is not a number")
        return value
    if kind in ("tuple", "list"):
        items = item.get("items")
        if not isinstance(items, list):
            raise WireError("a sequence has no items")
        decoded = [decode(i, blobs) for i in items]
        return tuple(decoded) if kind == "tuple" else decoded
    if kind == "other":
        return Opaque(str(item.get("type", "object")))
    raise WireError(f"unknown value kind {kind!r}")


class Opaque:
    """A value the learner's code returned that is neither a tensor, None, a number nor a sequence."""

    def __init__(self, type_name: str) -> None:
        self.type_name = type_name

    def __repr__(self) -> str:
        return f"<{self.type_name}>"


def _decode_tensor(item: dict[str, Any], blobs: list[bytes]) -> torch.Tensor:
    dtype = _DTYPES.get(str(item.get("dtype")))
    shape = item.get("shape")
    index = item.get("blob")
    if dtype is None or not isinstance(shape, list) or not isinstance(index, int):
        raise WireError("a tensor has no valid dtype, shape or data")
    if not all(isinstance(d, int) and d >= 0 for d in shape) or not 0 <= index < len(blobs):
        raise WireError("a tensor has an invalid shape or data index")
    blob = blobs[index]
    numel = 1
    for d in shape:
        numel *= d
    itemsize = torch.empty((), dtype=dtype).element_size()
    if len(blob) != numel * itemsize:
        raise WireError("a tensor's data does not match its shape")
    if numel == 0:
        tensor = torch.empty(shape, dtype=dtype)
    elif dtype == torch.bool:
        tensor = torch.frombuffer(bytearray(blob), dtype=torch.uint8).to(torch.bool).reshape(shape)
    else:
        tensor = torch.frombuffer(bytearray(blob), dtype=dtype).reshape(shape)
    return _apply_layout(tensor, str(item.get("layout", "plain")))


def _apply_layout(tensor: torch.Tensor, layout: str) -> torch.Tensor:
    """Rebuild the memory layout the checker asked for (``plain``, ``strided``: the last
    two dimensions transposed in memory, ``permuted``: the third from the end stored
    last, ``expanded``: stride 0): the values stay the same."""
    if layout == "strided" and tensor.numel() > 1:
        if tensor.dim() >= 2:
            # The memory of a transposed tensor: strides that .view cannot merge.
            return tensor.transpose(-1, -2).contiguous().transpose(-1, -2)
        # Every other element of a buffer twice as large.
        buffer = torch.zeros((*tensor.shape, 2), dtype=tensor.dtype)
        buffer[..., 0] = tensor
        return buffer[..., 0]
    if layout == "permuted" and tensor.numel() > 1 and tensor.dim() >= 3:
        # The third dimension from the end stored last: channels_last for (N, C, H, W),
        # heads split from (B, T, H, d) by a transpose for attention. A .view that merges
        # the leading dimensions fails on it, as in the network.
        return tensor.movedim(-3, -1).contiguous().movedim(-1, -3)
    if layout == "expanded" and tensor.numel() > 0:
        # What `y.sum().backward()` hands down: one value, stride 0 everywhere.
        return tensor.reshape(-1)[:1].reshape(()).expand(tensor.shape)
    return tensor
