"""Finite differences, in one place: the Jacobian columns gradcheck's report needs, the
second derivatives of double backward, and the one-sided slopes at a kink."""

from __future__ import annotations

from collections.abc import Callable

import torch

Function = Callable[[torch.Tensor], torch.Tensor]


def _nudged(point: torch.Tensor, element: int, step: float) -> torch.Tensor:
    shifted = point.detach().clone()
    shifted.reshape(-1)[element] += step
    return shifted


def central_differences(function: Function, point: torch.Tensor, eps: float) -> torch.Tensor:
    """d function / d point, one column per element of ``point``: (outputs, inputs), float64."""
    columns = [
        (
            function(_nudged(point, element, eps)).reshape(-1).to(torch.float64)
            - function(_nudged(point, element, -eps)).reshape(-1).to(torch.float64)
        )
        / (2 * eps)
        for element in range(point.numel())
    ]
    return torch.stack(columns, dim=1)


def one_sided_slopes(
    function: Function, point: torch.Tensor, element: int, step: float
) -> tuple[float, float]:
    """The left and right slopes of output ``element`` in input ``element``, smaller first."""
    at = float(function(point.detach().clone()).reshape(-1)[element])
    left = (at - float(function(_nudged(point, element, -step)).reshape(-1)[element])) / step
    right = (float(function(_nudged(point, element, step)).reshape(-1)[element]) - at) / step
    return min(left, right), max(left, right)
