"""`trainer next`: start the first exercise not passed yet (of one track).

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
    start_exercise,
)
from trainer.spec import TRACKS

app = typer.Typer(add_completion=False)


def _complete_track(incomplete: str) -> list[str]:
    return [t for t in TRACKS if t.startswith(incomplete)]


@app.command("next", rich_help_panel=LEARN_PANEL)
def next_exercise(
    ctx: typer.Context,
    track: Annotated[
        str | None,
        typer.Option(
            "--track",
            "-t",
            help=f"Pick within one track: {', '.join(TRACKS)}.",
            show_default=False,
            autocompletion=_complete_track,
        ),
    ] = None,
    workspace: WorkspaceOption = None,
    exercises_dir: ExercisesDirOption = None,
) -> None:
    """Start the first exercise you have not passed yet, in the order of your study
    plan when you made one (`trainer plan`), else of `trainer list`.

    With --track, an exercise whose prerequisites (in other tracks) are not passed
    yet starts the first of them instead.

    Example: trainer next --track losses
    """
    if track is not None and track not in TRACKS:
        raise typer.BadParameter(
            f"{track!r} is not a track; the tracks are {', '.join(TRACKS)}.",
            param_hint="'--track'",
        )
    session = open_session(ctx, workspace, exercises_dir)
    if track is None and session.exists:
        from trainer.study_plan import next_in_plan

        planned = next_in_plan(session.store.load(), session.catalog.all)
        if planned is not None:
            console.notice(f"Following your study plan (`trainer plan`): `{planned}` is next.")
            start_exercise(session, session.catalog.get(planned))
            return
    exercise = session.first_not_passed(track)
    if exercise is None:
        exercises = [e for e in session.catalog.all if track is None or e.track == track]
        console.all_passed(len(exercises), TRACKS.get(track or ""))
        return
    missing = session.prerequisites_not_passed(exercise)
    if missing:
        # Only with --track: without one, the catalogue's order puts prerequisites first.
        console.notice(
            f"`{exercise.id}` requires {', '.join(f'`{e.id}`' for e in missing)}, not passed "
            f"yet: starting `{missing[0].id}` first."
        )
        exercise = missing[0]
    start_exercise(session, exercise)
