"""The first wrong gradient, walking backward through the chain a spec declares.

A spec's ``intermediates:`` writes forward as a chain of named layers (the logits,
the batch-norm output, ...). When backward parity fails, the learner's backward is
a black box that returns its inputs' gradients, written atomically (one step per
intermediate) or collapsed (one formula per layer). Whichever the route, the
gradient at each layer it passes is the output of some op. So:

* here, in the checker, the plan holds the reference's gradient at each layer
  (``Run.layer_grads``, :mod:`chain`);
* the learner's process is asked for one more forward and backward of the same
  run (``protocol.LayerTensors``), with the layers' shapes and nothing else, and
  sends back copies of the tensors backward made with as many elements as a layer;
* here again, walking the chain in backward order (each layer, then the inputs
  whose gradients it gives), each layer is *found* when one of those tensors holds
  its reference gradient, and each input is right or wrong by its returned gradient.

:func:`locate` names the first place that is not right, and only when the
evidence says so. An input's wrong gradient is certain. A layer whose gradient
was not found but a layer below it was is right, computed inside a larger
expression: the walk goes on. Any other layer whose gradient was not found is
named only when nothing was left out of the reply, backward computed some tensor of
its size on its way (not one of its results: a gradient worked out in forward and
only scaled by backward never passes through backward as a layer's), the inputs
it gives gradients to are not all right, and one input below it is wrong.
Otherwise it says nothing rather than guess.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from trainer.checking import protocol
from trainer.checking.trusted.plan import SMALL, Run
from trainer.checking.trusted.proxy import LearnerFault
from trainer.checking.trusted.stages import Checked, learner_gradients
from trainer.spec import Chain, TensorParam

# Kept before any learner code runs (the checker runs none, but a stage is no place to
# find out that torch changed under it).
_allclose = torch.allclose

# How near a tensor must be to the reference's gradient at a layer to be it (float64
# runs), relative to the gradient's largest element, and at least: far looser than
# rounding, far tighter than any wrong formula.
RTOL = 1e-6
ATOL = 1e-9
ATOL_FLOOR = 1e-12


@dataclass(frozen=True)
class FirstWrong:
    """Where the first wrong gradient is: a layer's name or an input's, and in words."""

    at: str
    details: list[str]


def same(got: torch.Tensor, want: torch.Tensor) -> bool:
    """Whether ``got`` holds the gradient ``want`` at a layer: with its shape, as many
    elements read in the same order (a gradient kept as (N, T, d) for a layer of
    (N, T·d)), or the transpose of a matrix that is not square (a backward that works
    with (V, N) for (N, V); a square one's transpose could be the mistake itself)."""
    if not got.is_floating_point():
        return False
    if got.shape == want.shape:
        candidate = got
    elif got.dim() == 2 == want.dim() and got.shape == want.shape[::-1] != want.shape:
        candidate = got.mT
    elif got.numel() == want.numel():
        candidate = got.reshape(want.shape)
    else:
        return False
    scale = float(want.abs().max()) if want.numel() else 0.0
    atol = ATOL * scale + ATOL_FLOOR
    return bool(_allclose(candidate.double(), want, rtol=RTOL, atol=atol))


def locate(
    chain: Chain,
    found: Sequence[bool],
    right: Mapping[str, bool],
    truncated: bool,
    candidates: Sequence[bool] | None = None,
) -> str | None:
    """The first place, in backward order, whose gradient is not right: an input, when
    its returned gradient is wrong; a layer, when no tensor holds its gradient and the
    evidence rules out a right one computed inside a larger expression or elsewhere.
    ``candidates``: per layer, whether backward computed any tensor of its size on its
    way (its results aside). None when nothing can be concluded."""
    for name, index in chain.order():
        if index == 0:
            if right.get(name, True):
                continue
            return name
        if found[index - 1] or any(found[index:]):
            continue  # right; or right inside a larger expression, as a layer below is
        if truncated:
            return None  # perhaps among the tensors left out of the reply
        if candidates is not None and not candidates[index - 1]:
            return None  # backward computed nothing of its size: it was computed elsewhere
        fed = [n for n, at in chain.feeds.items() if at == index and n in right]
        if fed and all(right[n] for n in fed):
            return None  # what it gives gradients to is right: so, it seems, is it
        below = [n for n, at in chain.feeds.items() if at >= index and n in right]
        if all(right[n] for n in below):
            return None
        return name
    return None


def first_wrong(checked: Checked, failed: Run) -> FirstWrong | None:
    """For a failed run of backward parity, where the first wrong gradient is (see the
    module's docstring), or None when the spec declares no chain or nothing can be
    concluded. Asked on the float64 run of the same case."""
    chain = checked.exercise.intermediates
    run = _float64_run(checked, failed)
    if chain is None or run is None or len(run.layer_grads) != len(chain.layers):
        return None
    grads = learner_gradients(checked.function_class, run, checked.exercise)
    if not isinstance(grads, dict):
        return None
    # An input's gradient is right as backward parity has it: within the run's tolerance.
    tolerance = run.tolerance
    right = {
        name: got is not None
        and got.shape == run.expected_grads[name].shape
        and bool(
            _allclose(
                got.double(), run.expected_grads[name], rtol=tolerance.rtol, atol=tolerance.atol
            )
        )
        for name, got in grads.items()
    }
    request = protocol.LayerTensors(
        args=[a.detach() if isinstance(a, torch.Tensor) else a for a in run.args],
        requires_grad=[isinstance(p, TensorParam) and p.requires_grad for p in run.params],
        upstream=list(run.upstream),
        shapes=[list(g.shape) for g in run.layer_grads],
    )
    try:
        reply = checked.sandbox.call(request)
    except LearnerFault:  # the process ended or sent what cannot be read: no more to say
        return None
    if reply.error is not None:
        return None
    sent = protocol.listed(reply.tensors)[: protocol.LAYER_TENSORS_MOST]
    results = reply.returned + [False] * (len(sent) - len(reply.returned))
    made = [(t, r) for t, r in zip(sent, results, strict=False) if isinstance(t, torch.Tensor)]
    found = [any(same(t, want) for t, _ in made) for want in run.layer_grads]
    # A layer is judged only when backward computed a tensor of its size on its way:
    # a gradient worked out in forward and scaled by backward leaves it none.
    candidates = [any(t.numel() == g.numel() and not r for t, r in made) for g in run.layer_grads]
    truncated = reply.truncated or len(protocol.listed(reply.tensors)) > len(sent)
    at = locate(chain, found, right, truncated, candidates)
    if at is None:
        return None
    return FirstWrong(at, _words(chain, at))


def _float64_run(checked: Checked, failed: Run) -> Run | None:
    """The float64 run of the failed run's case (the run itself, if float64), if small."""
    for run in checked.plan.runs:
        if run.case == failed.case and run.dtype == torch.float64 and run.numel <= SMALL:
            return run
    return None


def _words(chain: Chain, at: str) -> list[str]:
    layers = {layer.name: (index, layer) for index, layer in enumerate(chain.layers, 1)}
    if at in layers:
        index, layer = layers[at]
        head = f"The first wrong gradient, walking backward, is at {layer.words}"
        below = " or at any layer below it" if index < len(chain.layers) else ""
        why = [
            "None of the tensors your backward computes holds the right gradient there"
            f"{below}, whichever way it is written."
        ]
    else:
        index = chain.feeds[at] + 1
        head = f"The first wrong gradient, walking backward, is the one for `{at}`"
        why = []
    above = [layer.words for layer in chain.layers[: index - 1]]
    right = f": your backward gets the gradients at {_listed(above)} right" if above else ""
    return [head + right + ".", *why]


def _listed(words: Sequence[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]
