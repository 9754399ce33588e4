"""The checker's vocabulary: its stages and the mistakes it names (no torch, no spec).

This is the one declaration of each stage: its id (in ``--json`` and in specs'
``fails_at``), its title, when it applies, and the function that runs it in
the checker (a ``module:function`` path, imported only there). The report's
order, the spec vocabulary, the skip logic and the checker's stage list all
derive from :data:`STAGES`. Adding a stage is one module and one line here.

:data:`MISTAKES` is the one vocabulary of classic mistakes: id (in ``--json``
and in specs' ``mistake``) and the words the learner reads. The rules that
recognise them live in the checker (``trusted/diagnosis.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol


class _ExerciseFacts(Protocol):
    """What a stage's condition may look at (an ``Exercise`` has it all)."""

    parameters: Any
    stability: Any
    gradcheck: bool
    double_backward: bool
    outputs: int


def _always(exercise: _ExerciseFacts, double_backward: bool) -> bool:
    return True


def _has_kinks(exercise: _ExerciseFacts, double_backward: bool) -> bool:
    return any(getattr(p, "kinks", ()) for p in exercise.parameters)


def _wants_gradcheck(exercise: _ExerciseFacts, double_backward: bool) -> bool:
    return exercise.gradcheck


def _wants_double_backward(exercise: _ExerciseFacts, double_backward: bool) -> bool:
    return exercise.double_backward or double_backward


@dataclass(frozen=True)
class Stage:
    id: str
    title: str
    runs: str  # "module:function", a StageBody run in the checker
    applies: Callable[[_ExerciseFacts, bool], bool] = _always
    required: bool = False  # every check has it, before the checker says which it runs
    may_skip_in_a_pass: bool = False  # a skip here still passes (no GPU)


_STAGES = "trainer.checking.trusted"

STAGES: tuple[Stage, ...] = (
    Stage("load", "Load and structure", f"{_STAGES}.load:load_stage", required=True),
    Stage("forward", "Forward parity", f"{_STAGES}.forward:forward_stage", required=True),
    Stage("backward", "Backward parity", f"{_STAGES}.backward:backward_stage", required=True),
    Stage("contract", "Backward contract", f"{_STAGES}.contract:contract_stage", required=True),
    Stage("by_hand", "Derived by hand", f"{_STAGES}.by_hand:by_hand_stage"),
    Stage("state", "Calls as in training", f"{_STAGES}.state:state_stage"),
    Stage("kinks", "Kink points", f"{_STAGES}.kinks:kinks_stage", _has_kinks),
    Stage("stability", "Domain and stability", f"{_STAGES}.stability:stability_stage"),
    Stage(
        "gradcheck", "gradcheck (float64)", f"{_STAGES}.gradcheck:gradcheck_stage", _wants_gradcheck
    ),
    Stage(
        "double_backward",
        "Double backward",
        f"{_STAGES}.double_backward:double_backward_stage",
        _wants_double_backward,
    ),
    Stage("cuda", "CUDA", f"{_STAGES}.cuda:cuda_stage", may_skip_in_a_pass=True),
)

STAGE_BY_ID = {stage.id: stage for stage in STAGES}
STAGE_IDS = tuple(STAGE_BY_ID)


def stages_for(exercise: _ExerciseFacts, double_backward: bool = False) -> list[Stage]:
    """The stages this exercise gets, in order."""
    return [stage for stage in STAGES if stage.applies(exercise, double_backward)]


# id -> what the learner reads when the checker names it.
MISTAKES: dict[str, str] = {
    "not_written": "backward is not written yet",
    "no_grad_output": "backward does not multiply by grad_output: the result stays the same when the upstream gradient changes",
    "sign_flipped": "the sign is flipped: the gradient is the negative of the right one",
    "constant_factor": "the gradient is off by a constant factor",
    "transposed": "the gradient is transposed",
    "not_summed_over_batch": "the gradient is not summed over the batch dimension",
    "all_zeros": "the gradient is all zeros",
    "missing_mask": "the gradient flows where the function is flat: a mask is missing or wrong",
    "inverted_mask": "the mask is inverted: the gradient flows exactly where it should be zero",
    "wrong_count": "backward returns the wrong number of values",
    "grad_for_non_tensor": "backward returns a gradient for an input that is not a tensor",
    "none_for_required": "backward returns None for an input that requires grad",
    "not_a_tensor": "backward returns something that is not a tensor",
    "wrong_shape": "a gradient does not have the shape of its input",
    "wrong_dtype": "a gradient does not have the dtype of its input",
    "wrong_device": "a gradient is not on its input's device",
    "in_place_grad_output": "backward modifies grad_output in place",
    "non_contiguous": "backward depends on the memory layout of its inputs or grad_output",
    "needs_input_grad": "backward gives other gradients when only some inputs require grad",
    "kink_value": "the gradient at a kink is not a valid subgradient",
    "near_kink": "the gradient is wrong close to a kink",
    "non_finite": "the result is inf or nan where the reference is finite",
    "wrong_on_domain": "the result is wrong for some inputs of the domain (large magnitudes?)",
    "scales_grad_output": "backward clips or rescales grad_output instead of multiplying by it",
    "ignores_an_upstream": "backward ignores one of the upstream gradients",
    "state_outside_ctx": "backward depends on something outside ctx and its inputs",
    "missing_upstream": "backward fails when a loss uses only some outputs (an upstream gradient is None or zeros)",
    "derived_by_torch": "backward lets torch derive the gradient instead of deriving it by hand",
    "unknown": "it matches none of the classic mistakes (missing grad_output, sign, constant factor, transpose, batch sum, zeros, mask)",
}
MISTAKE_IDS = tuple(MISTAKES)
