"""The checker's vocabulary: its stages and the mistakes it names (no torch, no spec).

This is the one declaration of each stage: its id (in ``--json`` and in specs'
``fails_at``), its title, when it applies, the function that runs it in the
checker (a ``module:function`` path, imported only there), its default weight
in a grade (0 for a stage the stub passes: points are for the learner's own
work) and what it checks in words that give no values away (the
``summary`` feedback level). The report's order, the spec vocabulary, the skip
logic, the grade's columns and the checker's stage list all derive from
:data:`STAGES`. Adding a stage is one module and one line here.

:data:`MISTAKES` is the one vocabulary of classic mistakes: id (in ``--json``
and in specs' ``mistake``) and the words the learner reads. The rules that
recognise them live in the checker (``trusted/diagnosis.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any, Protocol


class _ExerciseFacts(Protocol):
    """What a stage's condition may look at (an ``Exercise`` has it all)."""

    parameters: Any
    stability: Any
    gradcheck: bool
    double_backward: bool
    outputs: int
    function_api: Any
    form: str

    @property
    def follow_up(self) -> Any: ...  # the active follow-up (spec.FollowUp), or None


def _always(exercise: _ExerciseFacts, double_backward: bool) -> bool:
    return True


def _has_kinks(exercise: _ExerciseFacts, double_backward: bool) -> bool:
    return any(getattr(p, "kinks", ()) for p in exercise.parameters)


def _wants_gradcheck(exercise: _ExerciseFacts, double_backward: bool) -> bool:
    return exercise.gradcheck


def _wants_double_backward(exercise: _ExerciseFacts, double_backward: bool) -> bool:
    return exercise.double_backward or double_backward


def _uses(feature: str) -> Callable[[_ExerciseFacts, bool], bool]:
    """The exercise lists ``feature`` in its spec's ``function_api``."""

    def applies(exercise: _ExerciseFacts, double_backward: bool) -> bool:
        return feature in exercise.function_api

    return applies


def _follows_up(kind: str) -> Callable[[_ExerciseFacts, bool], bool]:
    """The learner took up a follow-up of this kind (``trainer followup``): it is checked."""

    def applies(exercise: _ExerciseFacts, double_backward: bool) -> bool:
        return exercise.follow_up is not None and exercise.follow_up.check == kind

    return applies


# What torch.func.jvp and torch.func.grad import on first use.
_TORCH_FUNC = ("torch._dynamo",)
_FORWARD_AD = ("torch._decomp.decompositions_for_jvp",)

# What a spec's ``function_api`` may list: the parts of the Function API it teaches.
FUNCTION_API = ("mark_dirty", "non_differentiable", "jvp", "vmap", "autocast")


@dataclass(frozen=True)
class Stage:
    id: str
    title: str
    runs: str  # "module:function", a StageBody run in the checker
    applies: Callable[[_ExerciseFacts, bool], bool] = _always
    required: bool = False  # every check has it, before the checker says which it runs
    may_skip_in_a_pass: bool = False  # a skip here still passes (no GPU)
    weight: int = 1  # its points in a grade, unless the spec's ``weights`` say otherwise
    # The stub passes it (a stub's forward works): worth 0 in a grade, and a spec may
    # not weight it. `trainer validate` runs each stub through every stage and fails a
    # spec whose stub passes a stage that is worth points.
    with_stub: bool = False
    checks: str = ""  # what passing means, with no values (the ``summary`` feedback)
    # torch modules its calls import on their first use in a process, in the checker and
    # in the learner's process: imported once by the server and by the learner zygote,
    # before they fork, so that no check pays them again (torch.func: ~0.8 s of CPU).
    checker_imports: tuple[str, ...] = ()
    learner_imports: tuple[str, ...] = ()
    # The answer forms it checks (see trainer.checking.learner.answers): the Function
    # API's stages teach the class itself, opcheck the custom op's registration.
    forms: tuple[str, ...] = ("function", "custom_op")


_STAGES = "trainer.checking.trusted"
_API = f"{_STAGES}.function_api"

STAGES: tuple[Stage, ...] = (
    Stage(
        "load",
        "Load and structure",
        f"{_STAGES}.load:load_stage",
        required=True,
        weight=0,
        with_stub=True,
        checks="the file loads and defines the Function with static forward and backward",
    ),
    Stage(
        "forward",
        "Forward parity",
        f"{_STAGES}.forward:forward_stage",
        required=True,
        weight=0,
        with_stub=True,
        checks="forward gives the reference's outputs",
    ),
    Stage(
        "backward",
        "Backward parity",
        f"{_STAGES}.backward:backward_stage",
        required=True,
        weight=4,
        checks="backward gives autograd's gradients of the reference",
    ),
    Stage(
        "contract",
        "Backward contract",
        f"{_STAGES}.contract:contract_stage",
        required=True,
        checks="backward returns one gradient per input, shaped and typed like it, "
        "and leaves grad_output alone",
    ),
    Stage(
        "mark_dirty",
        "In place (mark_dirty)",
        f"{_API}:mark_dirty_stage",
        _uses("mark_dirty"),
        weight=2,
        checks="forward modifies its input in place and marks it dirty",
        forms=("function",),
    ),
    Stage(
        "non_differentiable",
        "Non-differentiable outputs",
        f"{_API}:non_differentiable_stage",
        _uses("non_differentiable"),
        weight=2,
        checks="outputs that carry no gradient are marked non-differentiable",
        forms=("function",),
    ),
    Stage(
        "jvp",
        "Forward mode (jvp)",
        f"{_STAGES}.forward_mode:jvp_stage",
        _uses("jvp"),
        weight=3,
        checks="jvp gives the Jacobian times the input tangents",
        checker_imports=_TORCH_FUNC + _FORWARD_AD,  # the reference's tangents
        learner_imports=_TORCH_FUNC + _FORWARD_AD,
        forms=("function",),
    ),
    Stage(
        "vmap",
        "vmap and per-sample gradients",
        f"{_STAGES}.batching:vmap_stage",
        _uses("vmap"),
        weight=3,
        checks="torch.func.vmap and torch.func.grad work through the Function",
        learner_imports=_TORCH_FUNC,
        forms=("function",),
    ),
    Stage(
        "autocast",
        "Under autocast",
        f"{_STAGES}.autocast:autocast_stage",
        _uses("autocast"),
        weight=2,
        checks="under torch.autocast forward and backward keep float32 where the op needs it",
    ),
    Stage(
        "state",
        "Calls as in training",
        f"{_STAGES}.training_calls:training_calls_stage",
        checks="many calls in a row, shared graphs and accumulated gradients stay right",
    ),
    Stage(
        "kinks",
        "Kink points",
        f"{_STAGES}.kinks:kinks_stage",
        _has_kinks,
        checks="the gradient is a valid subgradient at and close to every kink",
    ),
    Stage(
        "stability",
        "Domain and stability",
        f"{_STAGES}.stability:stability_stage",
        weight=2,
        checks="forward and backward stay right across the whole domain and upstream scales",
    ),
    Stage(
        "gradcheck",
        "gradcheck (float64)",
        f"{_STAGES}.gradcheck:gradcheck_stage",
        _wants_gradcheck,
        weight=2,
        checks="analytical and numerical Jacobians agree in float64",
    ),
    Stage(
        "second_order",
        "Second derivatives",
        f"{_STAGES}.second_order:second_order_stage",
        _wants_double_backward,
        weight=2,
        checks="second derivatives through backward are right",
    ),
    Stage(
        "double_backward",
        "Double backward",
        f"{_STAGES}.double_backward:double_backward_stage",
        _wants_double_backward,
        weight=2,
        checks="backward is itself differentiable (gradgradcheck)",
    ),
    Stage(
        "cuda",
        "CUDA",
        f"{_STAGES}.cuda:cuda_stage",
        may_skip_in_a_pass=True,
        weight=0,  # a grade must not depend on whether the grading machine has a GPU
        checks="forward and backward run on a GPU",
    ),
    Stage(
        "opcheck",
        "torch.library.opcheck",
        f"{_STAGES}.opcheck:opcheck_stage",
        forms=("custom_op",),
        weight=0,  # the stub gives the schema and the fake implementation: no points
        with_stub=True,
        learner_imports=("torch.testing._internal.optests",),
        checks="the op's schema, autograd registration and fake implementation suit torch.compile",
    ),
    # The interviewer's follow-ups, after every other stage but by_hand (which sees them
    # too): a follow-up's wrong answer passes the others. Worth nothing in a grade; only the active follow-up's runs.
    Stage(
        "follow_up_saved",
        "Follow-up: saved memory",
        f"{_STAGES}.follow_ups:saved_stage",
        _follows_up("saved"),
        weight=0,
        checks="what forward keeps for backward stays within the follow-up's budget",
    ),
    Stage(
        "follow_up_memory",
        "Follow-up: working memory",
        f"{_STAGES}.follow_ups:working_memory_stage",
        _follows_up("working_memory"),
        weight=0,
        checks="what backward allocates while it runs stays within a multiple of the "
        "largest input or output",
    ),
    Stage(
        "follow_up_speed",
        "Follow-up: speed",
        f"{_STAGES}.follow_ups:speed_stage",
        _follows_up("speed"),
        weight=0,
        checks="backward takes at most a multiple of the reference's time",
    ),
    # Last: it reports what the learner's process saw during every stage before it.
    Stage(
        "by_hand",
        "Derived by hand",
        f"{_STAGES}.by_hand:by_hand_stage",
        checks="the gradient is derived by hand: written with ordinary tensor operations, "
        "not by autograd, a graph tracer, finite differences or sympy",
    ),
)

STAGE_BY_ID = {stage.id: stage for stage in STAGES}

# Each kind of follow-up (spec.FOLLOW_UP_KINDS) and the stages that grade it.
FOLLOW_UP_STAGES = {
    "saved": ("follow_up_saved",),
    "working_memory": ("follow_up_memory",),
    "speed": ("follow_up_speed",),
    "double_backward": ("second_order", "double_backward"),
    "domain": ("stability",),
}


def follow_up_stages(kind: str) -> tuple[str, ...]:
    return FOLLOW_UP_STAGES.get(kind, ())


STAGE_IDS = tuple(STAGE_BY_ID)


def stages_for(exercise: _ExerciseFacts, double_backward: bool = False) -> list[Stage]:
    """The stages this exercise gets, in order: those for its answer's form that apply."""
    return [
        stage
        for stage in STAGES
        if exercise.form in stage.forms and stage.applies(exercise, double_backward)
    ]


def selected(stages: list[Stage], only: Collection[str]) -> list[Stage]:
    """``stages`` cut to those ``only`` names, and load (every stage when ``only`` is empty)."""
    return [s for s in stages if not only or s.id == "load" or s.id in only]


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
    "modifies_saved_tensor": "a tensor saved for backward is changed in place, so a second backward over the graph fails",
    "changes_caller_tensors": "backward changes forward's inputs or outputs in place (through .data or a detached alias)",
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
    "not_in_place": "forward returns a new tensor instead of modifying its input in place",
    "not_marked_dirty": "forward modifies an input in place without ctx.mark_dirty: autograd still takes it for the unmodified input",
    "not_marked_non_differentiable": "an output that carries no gradient (indices) is not marked with ctx.mark_non_differentiable",
    "marks_differentiable_output": "an output that must carry a gradient is marked non-differentiable",
    "tie_gradient": "at tied values the gradient does not go to the elements forward's indices name",
    "no_jvp": "the Function has no jvp, so forward-mode AD cannot go through it",
    "not_saved_for_forward": "jvp reads ctx.saved_tensors, but forward saved nothing with ctx.save_for_forward",
    "wrong_jvp": "jvp's tangent is wrong: it is not the Jacobian times the input tangents",
    "no_setup_context": "forward takes ctx: torch.func transforms need forward without ctx and a setup_context",
    "no_vmap_rule": "neither generate_vmap_rule = True nor a vmap staticmethod: torch.func.vmap cannot batch the Function",
    "not_batchable": "forward or backward uses an op vmap cannot batch (.item(), in-place writes into a new tensor, data-dependent branches)",
    "wrong_under_vmap": "under torch.func.vmap the result is wrong (in_dims or out_dims mishandled)",
    "second_order_wrong": "the second derivative through backward is wrong: backward uses a value autograd sees as a constant",
    "not_differentiable_backward": "backward cannot be differentiated (once_differentiable, in-place ops on tensors autograd saved)",
    "grad_output_detached": "backward's result is not a differentiable function of grad_output",
    "unknown": "it matches none of the classic mistakes (missing grad_output, sign, constant factor, transpose, batch sum, zeros, mask)",
}
MISTAKE_IDS = tuple(MISTAKES)
