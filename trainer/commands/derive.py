"""`trainer derive`: the gradient as a formula, before the code, as an interviewer asks.

The formula is understood (:mod:`trainer.formula`, no torch) as soon as it is
typed; torch is imported, and the checker's random inputs drawn
(:mod:`trainer.whiteboard`), in a thread while the learner thinks.

No `from __future__ import annotations`: typer reads the annotations at run time.
"""

from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Annotated

import typer

from trainer import console
from trainer.commands.common import (
    LEARN_PANEL,
    ExerciseArgument,
    ExercisesDirOption,
    WorkspaceOption,
    open_session,
    show_notices,
)
from trainer.errors import ExitCode, TrainerError
from trainer.session import Session
from trainer.spec import Exercise

if TYPE_CHECKING:
    from trainer.whiteboard import Whiteboard

app = typer.Typer(add_completion=False)

STOPPED = (
    "the derivation stopped: no more input. Nothing was saved; run `trainer derive {id}` again."
)
NO_DERIVATION = (
    "{id} has no formula to derive (its spec has no derive section). "
    "`trainer derive --list` lists the exercises that have one."
)


@app.command(rich_help_panel=LEARN_PANEL)
def derive(
    ctx: typer.Context,
    exercise_id: ExerciseArgument = None,
    tries: Annotated[
        int,
        typer.Option(min=1, help="Wrong formulas allowed per gradient before the answer is shown."),
    ] = 3,
    seed: Annotated[
        int,
        typer.Option(min=0, help="Seed of the random inputs the formulas are evaluated on."),
    ] = 0,
    list_all: Annotated[
        bool,
        typer.Option("--list", help="The exercises with a formula to derive, and your record."),
    ] = False,
    workspace: WorkspaceOption = None,
    exercises_dir: ExercisesDirOption = None,
) -> None:
    """Write the gradient as a formula before the code; it is evaluated on random inputs.

    For each input the exercise asks about, type dL/d(input) over the names the
    exercise shows: the inputs by their names, y for the output (y1, y2 for
    several), g for the upstream gradient (grad_output), and the names it defines.
    Write + - * / and ^ or ** for powers, @ for a matrix product, ᵀ or .T to
    transpose, comparisons (1 where true, 0 elsewhere), exp log sqrt abs sign
    tanh sigmoid softplus relu erf Phi phi sin cos log1p expm1, max(a, b),
    min(a, b), where(c, a, b), sum(e, dim), mean, var, amax and logsumexp (they
    keep dim as size 1, so the result broadcasts; without dim they reduce
    everything; dim may be a list such as (0, 1)), softmax(e, dim),
    log_softmax(e, dim), unsqueeze(e, dim), numel(e) (the number of elements)
    and sum_to(e, name), which sums e down to the shape of an input. Nothing
    typed is run as Python.

    Every form of the right gradient is accepted; a wrong one is named by its
    classic mistake (forgets g, sign flipped, a constant factor, a transpose, a
    missing sum, the exercise's own); one that is not understood is shown with a
    caret where reading stopped, and is not counted. Enter on an empty line shows
    the answer. Exit 0 when every formula is right, 1 otherwise.

    Example: trainer derive sigmoid, then type: g * y * (1 - y)
    """
    session = open_session(ctx, workspace, exercises_dir)
    from trainer.derive import derivable

    if list_all:
        state = session.store.load() if session.exists else None
        from trainer.state import State

        console.derive_list(derivable(session.catalog.all), state or State())
        return
    exercise = session.exercise(exercise_id)
    if exercise.derive is None:
        raise TrainerError(NO_DERIVATION.format(id=exercise.id))
    right = run_derivation(session, exercise, tries, seed)
    raise typer.Exit(ExitCode.of_verdict(right))


def _whiteboard(exercise: Exercise, seed: int) -> "Whiteboard":
    from trainer.formula import EvaluationError
    from trainer.whiteboard import Whiteboard

    try:
        return Whiteboard(exercise, seed)
    except EvaluationError as error:  # a spec `trainer validate` would refuse
        raise TrainerError(
            f"{exercise.source}: derive.names: cannot be computed ({error.message}). "
            f"Run `trainer validate {exercise.source}`."
        ) from None


def run_derivation(session: Session, exercise: Exercise, tries: int, seed: int) -> bool:
    """Ask each gradient until it is right, ``tries`` wrong formulas are spent or the
    learner asks for the answer; record the result. True when every one was right."""
    from trainer.derive import asked, names, record

    console.derive_board(exercise, names(exercise))
    results: list[bool] = []
    with ThreadPoolExecutor(max_workers=1) as pool:
        board = pool.submit(_whiteboard, exercise, seed)
        try:
            for name in asked(exercise):
                results.append(_ask(exercise, name, board, tries))
        finally:
            board.cancel()
    outcome = record(session.writable_store(), exercise.id, sum(results), len(results))
    show_notices(session)
    console.derive_score(exercise, sum(results), len(results), outcome.attempts, outcome.passed)
    return all(results)


def _ask(exercise: Exercise, name: str, board: "Future[Whiteboard]", tries: int) -> bool:
    from trainer.formula import FormulaError, understand
    from trainer.whiteboard import Right

    assert exercise.derive is not None
    wrong = 0
    while wrong < tries:
        text = console.ask(f"dL/d{name} = ")
        if text is None:
            raise TrainerError(STOPPED.format(id=exercise.id))
        if not text.strip():
            break
        try:
            node = understand(text, exercise.derive.scope)
        except FormulaError as error:
            console.formula_not_understood(text, error.start, error.end, error.message)
            continue
        verdict = board.result().judge_node(name, node)
        if isinstance(verdict, Right):
            console.formula_right(name, verdict.runs)
            return True
        wrong += 1
        span = (verdict.error.start, verdict.error.end) if verdict.error is not None else None
        console.formula_wrong(
            text,
            verdict.words,
            verdict.case,
            verdict.wrong_runs,
            verdict.runs,
            verdict.view,
            span,
            tries - wrong,
        )
    console.formula_answer(name, exercise.derive.answers[name])
    return False
