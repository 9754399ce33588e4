"""`trainer stats`: where you stand, with your weak spots and two charts.

No `from __future__ import annotations`: typer reads the annotations at run time.
"""

import typer

from trainer import console
from trainer.commands.common import (
    LEARN_PANEL,
    ExercisesDirOption,
    WorkspaceOption,
    open_session,
    show_notices,
)

app = typer.Typer(add_completion=False)


@app.command("stats", rich_help_panel=LEARN_PANEL)
def stats(
    ctx: typer.Context,
    workspace: WorkspaceOption = None,
    exercises_dir: ExercisesDirOption = None,
) -> None:
    """Show completion per track, checks per day, your streak, time per exercise,
    interviews, and your weak spots with what practises each.

    Example: trainer stats
    """
    from trainer.state import State
    from trainer.stats import compute

    session = open_session(ctx, workspace, exercises_dir)
    state = session.store.load() if session.exists else State()
    show_notices(session)
    console.stats(compute(state, session.catalog.all, session.catalog.shared_quiz("concepts")))
