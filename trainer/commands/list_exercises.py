"""`trainer list`: the catalogue track by track, with your progress.

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
from trainer.errors import SPEC_ADVICE

app = typer.Typer(add_completion=False)


@app.command("list", rich_help_panel=LEARN_PANEL)
def list_exercises(
    ctx: typer.Context,
    workspace: WorkspaceOption = None,
    exercises_dir: ExercisesDirOption = None,
) -> None:
    """List the exercises with difficulty and your progress.

    Example: trainer list
    """
    from trainer.state import State

    session = open_session(ctx, workspace, exercises_dir)
    state = session.store.load() if session.exists else State()
    show_notices(session)
    # A broken spec (in a folder of one's own, say) is named once; the others are listed.
    exercises, broken = session.catalog.loadable()
    console.exercise_list(exercises, state, session.workspace.root if session.exists else None)
    for problem in broken:
        console.notice(f"not listed: {problem}. {SPEC_ADVICE}")
    if session.exists:
        from trainer.review import agenda

        concepts = session.catalog.shared_quiz("concepts")
        console.review_due(agenda(state, exercises, [concepts] if concepts else []))
