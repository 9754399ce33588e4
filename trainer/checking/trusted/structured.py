"""Inputs the spec allows but random draws never produce, derived from each float
tensor's declared range and domain, so that every exercise gets them for free.

- a shared offset of the first tensor (the data), large against the spread (a variance
  written E[x²] − E[x]²);
- near-constant tensors (statistics of a spread far below the values' size);
- exact zeros in whole rows and whole channels (a 0/0 on a padding row);
- a whole row of tiny values (a norm clamped at 1e-4 by an eps guard);
- the first tensor constant at the top of its domain and the others at the bottom (the
  extreme rows a product, a mask or a softmax makes: a causal row whose only visible
  score is far below any fill value);
- ties at every pair of positions of the windows an output chooses from (the tie rule),
  and near ties (the later larger by a hair: a tie rule faked with a tiny ramp).

Each builder returns float64 values; ``plan`` turns them into runs and computes the
slack a right answer needs in their dtype.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from trainer.spec import TensorParam

# Float dtypes are named here by their torch objects; ``plan`` maps them to runs.
F32, F64 = torch.float32, torch.float64
OFFSET_AT = 0.8  # the shared offset: this far from the domain's bottom to its top
NEAR_CONSTANT_SPREAD = 1e-6  # relative to the offset
WIDE = 4.0  # a domain this many times wider than [low, high] takes an offset
NEAR_TIE = 1e-9  # a near tie: the later element larger by this much, relatively
TINY = 1e-5  # a row of tiny values: below an eps clamp (1e-4), far above an eps added (1e-12)


@dataclass(frozen=True)
class Values:
    """One structured set of arguments (float64 tensors, ints and scalars as given)."""

    note: str  # said in the run's label: what is special about these values
    dtypes: tuple[torch.dtype, ...]  # the dtypes it runs in
    args: list[object]


def bounds(param: TensorParam) -> tuple[float, float]:
    return param.domain if param.domain is not None else (param.low, param.high)


def offset_of(param: TensorParam) -> float | None:
    """A value far from 0 inside the domain, where the domain is wide against the spread."""
    lowest, highest = bounds(param)
    if highest - lowest < WIDE * (param.high - param.low):
        return None
    return round(lowest + OFFSET_AT * (highest - lowest))


def _uniform(param: TensorParam, shape: Sequence[int], generator: torch.Generator) -> torch.Tensor:
    return torch.empty(tuple(shape), dtype=torch.float64).uniform_(
        param.low, param.high, generator=generator
    )


def offset(param: TensorParam, shape: Sequence[int], generator: torch.Generator) -> torch.Tensor:
    """The usual spread around a shared offset (activations centred near 300)."""
    centre = offset_of(param)
    values = _uniform(param, shape, generator)
    if centre is None:
        return values
    lowest, highest = bounds(param)
    return (values + centre).clamp(lowest, highest)


def near_constant(
    param: TensorParam, shape: Sequence[int], generator: torch.Generator
) -> torch.Tensor:
    """One value, moved by a millionth of itself: a spread far below the values' size."""
    centre = offset_of(param)
    if centre is None:
        centre = param.low + OFFSET_AT * (param.high - param.low)
    spread = NEAR_CONSTANT_SPREAD * max(abs(centre), 1.0)
    noise = torch.empty(tuple(shape), dtype=torch.float64).uniform_(-1, 1, generator=generator)
    return centre + spread * noise


def with_zero_slices(values: torch.Tensor, param: TensorParam | None = None) -> torch.Tensor:
    """Exact zeros in a whole row (the last dimension at the first index of the others)
    and a whole channel (the last index of dimension 1). A tensor of one dimension (a
    weight, a gamma) gets one zero in its middle, where its domain holds 0: a pruned
    channel, a zero-initialised gamma, which a backward dividing by the weight (x̂ got
    back as y / weight) turns into NaN. Zeroing it all would say nothing of rows."""
    values = values.clone()
    if values.dim() >= 2:
        values[(0,) * (values.dim() - 1)] = 0.0
        values[:, -1] = 0.0
    elif values.dim() == 1 and values.numel() >= 2:
        lowest, highest = bounds(param) if param is not None else (0.0, 0.0)
        if lowest <= 0.0 <= highest:
            values[values.numel() // 2] = 0.0
    return values


def with_tiny_slice(values: torch.Tensor, param: TensorParam) -> torch.Tensor:
    """A whole row (as :func:`with_zero_slices` places it) of values near TINY, signs as
    drawn, where the domain reaches that close to 0: not zero, but far below any eps
    guard, so a norm or a variance clamped at 1e-4 is wrong there. A tensor of one
    dimension keeps its values."""
    lowest, highest = bounds(param)
    if values.dim() < 2 or not lowest < TINY < highest:
        return values
    values = values.clone()
    row = (0,) * (values.dim() - 1)
    signs = torch.where(values[row] < 0, -1.0, 1.0).to(values.dtype)
    spread = torch.linspace(1.0, 3.0, values[row].numel(), dtype=values.dtype)
    values[row] = TINY * signs * spread
    return values


def constant(param: TensorParam, shape: Sequence[int], top: bool) -> torch.Tensor:
    lowest, highest = bounds(param)
    return torch.full(tuple(shape), highest if top else lowest, dtype=torch.float64)


Builder = Callable[[int, TensorParam, Sequence[int]], torch.Tensor]


def value_sets(
    floats: Sequence[tuple[int, TensorParam, Sequence[int]]],
    random_values: Callable[[TensorParam, Sequence[int]], torch.Tensor],
    generator: torch.Generator,
) -> list[tuple[str, tuple[torch.dtype, ...], Builder]]:
    """The structured sets for a case's float tensors (position, param, shape): a note, the
    dtypes that matter, and how to build each tensor. ``random_values`` draws a tensor
    across its domain, as the domain stage does."""
    first = floats[0][0] if floats else -1
    sets: list[tuple[str, tuple[torch.dtype, ...], Builder]] = []
    centre = offset_of(floats[0][1]) if floats else None
    if centre is not None:
        # The first tensor, the data (activations centred near 300), the others as usual:
        # offsets on all of them would multiply into scores no float32 answer resolves.
        # In float32, where float64 forgives a cancellation and float32 does not.
        sets.append(
            (
                f"{floats[0][1].name} near {centre:g} (a shared offset)",
                (F32,),
                lambda i, p, s: (
                    offset(p, s, generator) if i == first else _uniform(p, s, generator)
                ),
            )
        )
    sets.append(
        (
            "near-constant values (a spread of a millionth)",
            (F64,),
            lambda _i, p, s: near_constant(p, s, generator),
        )
    )
    sets.append(
        (
            "whole rows and channels of exact zeros",
            (F32, F64),
            lambda _i, p, s: with_zero_slices(random_values(p, s), p),
        )
    )
    sets.append(
        (
            f"a whole row of tiny values (magnitudes near {TINY:g})",
            (F64,),
            lambda _i, p, s: with_tiny_slice(random_values(p, s), p),
        )
    )
    # One tensor's bounds are in every domain run already; what they miss is tensors
    # at opposite bounds together.
    if len(floats) > 1:
        names = [p.name for _, p, _ in floats]
        sets.append(
            (
                f"{names[0]} at the top of its domain, {', '.join(names[1:])} at the bottom",
                (F64,),
                lambda i, p, s: constant(p, s, top=i == first),
            )
        )
    return sets


# Ties -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Window:
    """The input elements (flat positions, in order) one output element chooses from, and
    how many of them the outputs that share it take (1 for a max, k for a top-k)."""

    positions: tuple[int, ...]
    chosen: int


def windows(
    output_of: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor
) -> list[Window] | None:
    """The windows of an output that chooses among its inputs (a max, a top-k), found by
    moving one input element at a time above all others, then below: the output elements
    that change depend on it. None when no output element chooses among two or more inputs, or when
    some output is not a copy of one of them (a sum, a softmax: nothing to tie)."""
    base = output_of(x)
    top = float(x.abs().max()) * 2 + 1
    flat_outputs = base.numel()
    depends = torch.zeros(flat_outputs, x.numel(), dtype=torch.bool)
    for position in range(x.numel()):
        for extreme in (top, -top):  # raised, then lowered: a top-k's second place
            moved = x.clone()  # ignores its maximum raised, not lowered
            moved.reshape(-1)[position] = extreme
            depends[:, position] |= (output_of(moved) != base).reshape(-1)
    shared: dict[tuple[int, ...], int] = {}
    inputs, outputs = x.reshape(-1), base.reshape(-1)
    for output, row in enumerate(depends):
        positions = tuple(int(i) for i in row.nonzero().reshape(-1))
        if len(positions) < 2:
            continue
        if not bool((inputs[list(positions)] == outputs[output]).any()):
            return None  # not a choice: the output is no copy of an element it depends on
        shared[positions] = shared.get(positions, 0) + 1
    if not shared:
        return None
    return [Window(positions, chosen) for positions, chosen in shared.items()]


def tie_sets(
    found: list[Window],
    low: float,
    high: float,
    numel: int,
    generator: torch.Generator,
    covered: set[tuple[int, ...]],
) -> list[torch.Tensor]:
    """Inputs (flat, float64) in which, window by window, every pair of positions ties:
    at the top of the window, and (where the outputs take several) with as many elements
    above the pair as there are places above the last one taken, so the tie straddles it.
    Windows are tied in the same input as long as none holds an element another one set
    (overlapping windows share low elements only); a pair already in
    ``covered`` (by another case's windows of the same size) is not tied again. The last
    input is the first one with each pair nearly tied (see ``NEAR_TIE``)."""
    needs: dict[tuple[int, ...], None] = {}
    for window in found:
        size = len(window.positions)
        for rank in sorted({0, window.chosen - 1}):
            if rank <= size - 2:
                for i, j in itertools.combinations(range(size), 2):
                    if (size, window.chosen, i, j, rank) not in covered:
                        needs[(size, window.chosen, i, j, rank)] = None
    width = high - low
    tie_level = low + 0.75 * width
    sets: list[torch.Tensor] = []
    first_pairs: list[tuple[int, int]] = []  # the pairs tied in the first input
    while needs:
        values = torch.empty(numel, dtype=torch.float64).uniform_(
            low, low + 0.5 * width, generator=generator
        )
        claimed: set[int] = set()  # set at or above a tie level in this input
        inside: set[int] = set()  # in a window tied in this input
        for window in found:
            if claimed.intersection(window.positions):
                continue
            for need in needs:
                if need[:2] != (len(window.positions), window.chosen):
                    continue
                _, _, i, j, rank = need
                pair = (window.positions[i], window.positions[j])
                above = [p for p in window.positions if p not in pair][:rank]
                if inside.intersection((*pair, *above)):
                    continue  # it would raise a window tied before
                break
            else:
                continue
            del needs[need]
            covered.add(need)
            claimed.update((*pair, *above))
            inside.update(window.positions)
            values[list(pair)] = tie_level
            for step, position in enumerate(above, start=1):
                values[position] = tie_level + step * (high - tie_level) / (rank + 1)
            if not sets:
                first_pairs.append(pair)
        sets.append(values)
    if sets and first_pairs:
        # The first input again with the later element of each pair larger by a hair: no
        # tie, and the larger wins. A tie rule faked with a tiny ramp (argmax of the
        # window minus 1e-7 times the position) gives it to the earlier one.
        near = sets[0].clone()
        for _, later in first_pairs:
            near[later] = tie_level * (1 + NEAR_TIE) if tie_level else NEAR_TIE
        sets.append(near)
    return sets
