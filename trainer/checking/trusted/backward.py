"""Backward parity: gradients through autograd, with random upstream gradients, against the reference's."""

from __future__ import annotations

from trainer.checking.trusted.intermediates import first_wrong
from trainer.checking.trusted.stages import (
    Checked,
    Failure,
    StageOutcome,
    compare_gradients,
    draw,
    learner_gradients,
    summarise,
)


def backward_stage(checked: Checked) -> StageOutcome:
    function_class, plan, exercise = checked.function_class, checked.plan, checked.exercise
    failures: list[Failure] = []
    for run in plan.runs:
        if failures and checked.stop_after_failure:
            break  # validate reads the first failure only: its stage and its mistake
        grads = learner_gradients(function_class, run, exercise)
        if isinstance(grads, Failure):
            failures.append(grads)
            continue
        # The report names the first failing run's mistake and only counts the others:
        # they are compared, not diagnosed (a diagnosis asks the learner again).
        failure = compare_gradients(
            function_class, run, exercise, grads, run.expected_grads, diagnose_mistake=not failures
        )
        if failure:
            if not failures:
                failure.pictures = draw(checked, run, grads, failure.diagnosis)
            failures.append(failure)
    names = ", ".join(f"`{n}`" for n in plan.runs[0].grad_names())
    target = (
        "the spec's stated gradient ("
        + "; ".join(f"`{v}`" for v in exercise.expected_gradient.values())
        + ")"
        if exercise.expected_gradient
        else f"autograd of `{exercise.reference}`"
    )
    outcome = summarise(
        failures,
        len(plan.runs),
        f"gradients for {names} match {target} on {len(plan.runs)} runs with random upstream gradients",
    )
    if failures and failures[0].run is not None and exercise.intermediates is not None:
        found = first_wrong(checked, failures[0].run)
        if found is not None:
            outcome.details[:0] = found.details
            outcome.first_wrong = found.at
    if not failures and checked.draw_always:  # `trainer plot` on a right gradient
        first = plan.runs[0]
        grads = learner_gradients(function_class, first, exercise)
        if isinstance(grads, dict):
            outcome.pictures = draw(checked, first, grads, None, only_wrong=False)
    return outcome
