"""`trainer plan`: a study plan over the days you have, the interview core first.

No `from __future__ import annotations`: typer reads the annotations at run time.
"""

from typing import Annotated

import typer

from trainer import console
from trainer.commands.common import (
    LEARN_PANEL,
    ExercisesDirOption,
    WorkspaceOption,
    open_session,
    show_notices,
)
from trainer.spec import TRACKS

app = typer.Typer(add_completion=False)


def _complete_track(incomplete: str) -> list[str]:
    return [t for t in TRACKS if t.startswith(incomplete)]


@app.command("plan", rich_help_panel=LEARN_PANEL)
def plan(
    ctx: typer.Context,
    days: Annotated[
        int | None,
        typer.Option("--days", min=1, max=365, help="Days until your interview (default 14)."),
    ] = None,
    hours: Annotated[
        float | None,
        typer.Option(
            "--hours-per-day", min=0.25, max=16.0, help="Hours a day of study (default 2)."
        ),
    ] = None,
    track: Annotated[
        str | None,
        typer.Option(
            "--track",
            "-t",
            help=f"Plan one track, with what it requires: {', '.join(TRACKS)}.",
            show_default=False,
            autocompletion=_complete_track,
        ),
    ] = None,
    clear: Annotated[bool, typer.Option("--clear", help="Drop the plan.")] = False,
    workspace: WorkspaceOption = None,
    exercises_dir: ExercisesDirOption = None,
) -> None:
    """Plan your study: the exercises in an order that respects their prerequisites,
    the interview core first, spread over the days from your progress and each
    exercise's difficulty. `trainer next` follows the plan.

    Without options it shows the plan you made (or makes one of 14 days, 2 hours
    a day); with any, it makes a new one from today.

    Example: trainer plan --days 10 --hours-per-day 3
    """
    from trainer.state import State
    from trainer.study_plan import DEFAULT_DAYS, DEFAULT_HOURS, make_plan, schedule

    if track is not None and track not in TRACKS:
        raise typer.BadParameter(
            f"{track!r} is not a track; the tracks are {', '.join(TRACKS)}.",
            param_hint="'--track'",
        )
    session = open_session(ctx, workspace, exercises_dir)
    catalogue = session.catalog.all
    if clear:
        if session.exists:
            with session.writable_store().update() as state:
                state.plan = None
        show_notices(session)
        console.plan_cleared()
        return
    state = session.store.load() if session.exists else State()
    made = False
    if state.plan is None or days is not None or hours is not None or track is not None:
        new = make_plan(catalogue, days or DEFAULT_DAYS, hours or DEFAULT_HOURS, track)
        with session.writable_store().update() as state:
            state.plan = new
        made = True
    show_notices(session)
    assert state.plan is not None
    console.study_plan(schedule(state.plan, state, catalogue), made=made)
