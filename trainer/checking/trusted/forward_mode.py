"""The jvp stage: forward-mode AD through the learner's ``jvp``, against the reference's.

The checker's proxy Function has no ``jvp`` (its forward is the learner's,
computed in another process), so torch's ``gradcheck(check_forward_ad=True)``
cannot run here. Instead the learner's process pushes tangents through the
learner's Function two ways, as programs do: dual tensors
(``torch.autograd.forward_ad``) and ``torch.func.jvp`` (which needs
``setup_context``). Here ``torch.func.jvp`` of the reference expression gives
the exact Jacobian-vector products for the same tangents: random tangents on
every input at once, then on each input alone, so a wrong term is named by its
input.
"""

from __future__ import annotations

import torch

from trainer.checking import protocol
from trainer.checking.trusted.compare import compare_tensor, shape_text
from trainer.checking.trusted.function_api import decoded_list, fault_failure, mistake
from trainer.checking.trusted.plan import Run, evaluate_reference
from trainer.checking.trusted.proxy import LearnerFault
from trainer.checking.trusted.stages import Checked, Failure, StageOutcome, output_name, summarise
from trainer.spec import Exercise


def _tangent_sets(run: Run, generator: torch.Generator) -> list[tuple[str, list[object]]]:
    """(words, a tangent or None per argument): each input alone first, so that a wrong
    term is named by its input, then every input at once."""
    names = run.grad_names()
    positions = [i for i, p in enumerate(run.params) if p.name in names]

    def tangent(i: int) -> torch.Tensor:
        value = run.args[i]
        assert isinstance(value, torch.Tensor)
        return torch.randn(value.shape, dtype=torch.float64, generator=generator).to(value.dtype)

    every: list[object] = [tangent(i) if i in positions else None for i in range(len(run.args))]
    sets: list[tuple[str, list[object]]] = []
    if len(positions) > 1:
        for position in positions:
            alone = [every[i] if i == position else None for i in range(len(run.args))]
            others = ", ".join(f"`{n}`" for n in names if n != run.params[position].name)
            sets.append(
                (f"for a tangent on `{run.params[position].name}` only ({others}: none)", alone)
            )
    sets.append(("for tangents on " + ", ".join(f"`{n}`" for n in names), every))
    return sets


def _reference_jvp(
    exercise: Exercise, run: Run, tangents: list[object]
) -> tuple[torch.Tensor, ...]:
    positions = [
        i for i, a in enumerate(run.args) if isinstance(a, torch.Tensor) and a.is_floating_point()
    ]

    def call(*tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        merged = list(run.args)
        for position, tensor in zip(positions, tensors, strict=True):
            merged[position] = tensor
        return evaluate_reference(exercise, merged)

    primals = tuple(a for a in run.args if isinstance(a, torch.Tensor) and a.is_floating_point())
    directions = tuple(
        t if isinstance(t := tangents[i], torch.Tensor) else torch.zeros_like(p)
        for i, p in zip(positions, primals, strict=True)
    )
    result = torch.func.jvp(call, primals, directions)
    outputs, found = result[0], result[1]
    # torch.func.jvp may compute a tangent in float64 where a Python float multiplies a
    # float32 tensor; forward mode proper keeps the output's dtype.
    return tuple(t.to(o.dtype) for t, o in zip(found, outputs, strict=True))


def _error_failure(run: Run, error: protocol.LearnerError, saves_for_forward: bool) -> Failure:
    """Words for an error of the learner's jvp, or of torch refusing what it returned (the
    learner's process says which count or shape, as numbers: see ``api_calls._jvp_refusal``)."""
    message, details = error.message, error.details
    refused = error.jvp
    if isinstance(refused, dict) and "returned" in refused:
        text = (
            f"jvp returned {int(refused['returned'])} values but forward has "
            f"{int(refused['outputs'])} output(s): return one tangent per output (it is "
            "backward that returns one value per input)"
        )
        return Failure(run, text, details, mistake("wrong_jvp", text))
    if isinstance(refused, dict) and "returned_shape" in refused:
        returned = shape_text(tuple(int(d) for d in refused["returned_shape"]))
        wanted = shape_text(tuple(int(d) for d in refused["output_shape"]))
        text = (
            f"jvp returned a tangent of shape {returned} for an output of shape {wanted}: "
            "the tangent of an output has that output's shape"
        )
        return Failure(run, text, details, mistake("wrong_jvp", text))
    if not saves_for_forward:
        text = (
            f"{message}: forward saved nothing for jvp. In jvp, ctx.saved_tensors holds what "
            "forward saved with ctx.save_for_forward (ctx.save_for_backward is for backward only)"
        )
        return Failure(run, text, details, mistake("not_saved_for_forward", text))
    return Failure(run, message, details)


def _jvp_failure(checked: Checked, run: Run, notes: set[str]) -> Failure | None:
    exercise = checked.exercise
    name = exercise.class_name
    sets = _tangent_sets(run, torch.Generator().manual_seed(3))
    reply = checked.sandbox.answer(
        protocol.Jvp(args=list(run.args), tangents=[list(t) for _, t in sets])
    )
    if not reply.has_jvp:
        text = (
            f"`{name}` has no jvp: forward-mode AD (dual tensors, torch.func.jvp) calls "
            "`jvp(ctx, *tangents)`, one tangent per forward input, and needs one tangent "
            "per output back"
        )
        return Failure(None, text, diagnosis=mistake("no_jvp", text))
    routes = [("dual", "dual tensors")]
    if reply.has_setup_context:
        routes.append(("func", "torch.func.jvp"))
    else:
        notes.add(
            "forward takes ctx, so torch.func.jvp (and vmap, grad) cannot use the Function; "
            "dual tensors can. Split it into forward without ctx and a setup_context to serve both"
        )
    for route, route_words in routes:
        answers = reply.dual if route == "dual" else reply.func
        if len(answers) != len(sets):
            raise LearnerFault(f"the learner's process sent no {route_words} results")
        for (words, tangents), answer in zip(sets, answers, strict=True):
            if answer.error is not None:
                return _error_failure(run, answer.error, reply.saves_for_forward)
            got = decoded_list(answer.tangents, "tangents")
            expected = _reference_jvp(exercise, run, tangents)
            if len(got) != len(expected):
                text = (
                    f"jvp returned {len(got)} tangent{'s' * (len(got) != 1)} for "
                    f"{len(expected)} output{'s' * (len(expected) != 1)} ({route_words}): "
                    "return one tangent per output of forward"
                )
                return Failure(run, text, diagnosis=mistake("wrong_jvp", text))
            for index, (want, have) in enumerate(zip(expected, got, strict=True)):
                if route == "func" and isinstance(have, torch.Tensor) and have.is_floating_point():
                    have = have.to(want.dtype)  # the same float64 drift as the reference's
                mismatch = compare_tensor(
                    f"the tangent of {output_name(exercise, index)}", want, have, run.tolerance
                )
                if mismatch:
                    text = f"jvp gives a wrong tangent {words} ({route_words}): {mismatch.summary}"
                    return Failure(
                        run,
                        text,
                        [mismatch.detail] if mismatch.detail else [],
                        mistake("wrong_jvp", text),
                    )
    return None


def jvp_stage(checked: Checked) -> StageOutcome:
    runs = list(checked.plan.runs)
    failures: list[Failure] = []
    notes: set[str] = set()
    for run in runs:
        try:
            failure = _jvp_failure(checked, run, notes)
        except LearnerFault as fault:
            failure = fault_failure(run, fault, "jvp")
        if failure is not None:
            failures.append(failure)
            if failure.diagnosis and failure.diagnosis.mistake == "no_jvp":
                break  # the same for every run
    outcome = summarise(
        failures,
        len(runs),
        f"jvp matches torch.func.jvp of `{checked.exercise.reference}` on {len(runs)} runs, "
        "with tangents on every input and on each alone (dual tensors"
        + (" and torch.func.jvp)" if not notes else ")"),
    )
    outcome.notes = sorted(notes)
    return outcome
