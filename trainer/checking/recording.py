"""What a backward computes on its way: copies of the tensors its ops make.

Runs in the learner's process, for the request ``protocol.LayerTensors``: the
learner's backward is a black box whose only results are its inputs' gradients,
yet every value it computes on the way (the gradient at the logits, at a layer's
input) is the output of some aten op. A dispatch mode sees each op and keeps a copy
of the floating-point tensors it makes whose number of elements is one of those
asked for; an op that writes into a view (``g[i] = ...``) also has the tensor it
is a view of copied, as it is after the write. Nothing here knows what the values
should be: the checker compares them with the reference's, in its own process.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode


class BackwardTensors(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """While on, copies of the tensors aten ops make with ``sizes`` elements, in the
    order they were made, at most ``most`` of them and ``most_bytes`` bytes in all;
    ``truncated`` once one more did not fit (the checker then concludes nothing from a
    value it did not find)."""

    def __init__(self, sizes: Iterable[int], most: int, most_bytes: int) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.sizes = set(sizes)
        self.most = most
        self.most_bytes = most_bytes
        self.kept: list[torch.Tensor] = []
        self.storages: list[int] = []  # where each copied tensor's values lived
        self.bytes = 0
        self.truncated = False

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # else torch imports torch._dynamo at the first op (over a second)

    def __torch_dispatch__(
        self,
        func: torch._ops.OpOverload,
        types: Sequence[type],
        args: Sequence[Any] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        result = func(*args, **(kwargs or {}))
        writes = func._schema.is_mutable
        for tensor in pytree.tree_leaves(result):
            if not isinstance(tensor, torch.Tensor):
                continue
            self._keep(tensor)
            if writes and tensor._is_view() and tensor._base is not None:
                self._keep(tensor._base)  # a write through a view changes its base
        return result

    def _keep(self, tensor: torch.Tensor) -> None:
        if (
            tensor.numel() not in self.sizes
            or not tensor.is_floating_point()
            or tensor.layout != torch.strided
            or tensor.device.type == "meta"
        ):
            return
        size = tensor.numel() * tensor.element_size()
        if len(self.kept) >= self.most or self.bytes + size > self.most_bytes:
            self.truncated = True
            return
        self.kept.append(tensor.detach().clone())
        self.storages.append(tensor.untyped_storage().data_ptr())
        self.bytes += size

    def made_into(self, returned: Iterable[object]) -> list[bool]:
        """For each copy, whether the tensor it was copied from shares its memory with one
        of ``returned`` (backward's results, or views of them): a result is no value
        backward computed on its way."""
        results = {
            t.untyped_storage().data_ptr()
            for t in returned
            if isinstance(t, torch.Tensor) and t.layout == torch.strided
        }
        return [storage in results for storage in self.storages]
