"""`trainer classroom`: grade a GitHub Classroom assignment (`init`, `result`).

The files and the results are built in :mod:`trainer.classroom`; this module reads
the options and prints.

No `from __future__ import annotations`: typer reads the annotations at run time.
"""

import contextlib
import sys
from pathlib import Path
from typing import Annotated

import typer

from trainer import console
from trainer.commands.common import (
    AUTHOR_PANEL,
    ExercisesDirOption,
    WorkspaceOption,
    complete_exercise,
    open_session,
)

app = typer.Typer(name="classroom", no_args_is_help=True, add_completion=False)


@app.callback(rich_help_panel=AUTHOR_PANEL)
def classroom() -> None:
    """Grade a GitHub Classroom assignment: its workflow (init), each check's points (result).

    Example: trainer classroom init sigmoid relu linear
    """


DirOption = Annotated[
    Path, typer.Option("--dir", help="The template repository's folder (its top).")
]


@app.command()
def init(
    ctx: typer.Context,
    exercise_ids: Annotated[
        list[str],
        typer.Argument(
            metavar="EXERCISE...",
            help="The assignment's exercises, in the order they are graded.",
            autocompletion=complete_exercise,
        ),
    ],
    folder: DirOption = Path("."),
    install: Annotated[
        str | None,
        typer.Option(
            "--install",
            help="What the workflow gives `pip install` for the trainer (after a CPU torch); "
            "default: this trainer's wheel, written into .github/classroom/.",
        ),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Replace the files if they exist.")
    ] = False,
    workspace: WorkspaceOption = None,
    exercises_dir: ExercisesDirOption = None,
) -> None:
    """Write the autograding workflow, autograding.json and this trainer's wheel.

    The workflow (.github/workflows/classroom.yml) checks each exercise with
    `trainer check EX --json` and gives it the weights of the stages it passed.
    .github/classroom/autograding.json is the older autograder's format: all of an
    exercise's points or none. Exit code 0 when written; 2 when not (an unknown
    exercise, a file that exists without --force). The workflow installs the wheel
    from .github/classroom/ (the trainer is on no package index); --install names
    another source for pip instead, and then no wheel is written.

    Example: trainer classroom init sigmoid relu linear
    """
    from trainer.classroom import (
        WHEEL_FOLDER,
        classroom_files,
        in_repository,
        max_points,
        wheel_install,
        write_files,
    )
    from trainer.wheel import wheel_name, write_wheel

    session = open_session(ctx, workspace, exercises_dir)
    exercises = [session.catalog.get(exercise_id) for exercise_id in dict.fromkeys(exercise_ids)]
    items = [in_repository(exercise, folder) for exercise in exercises]
    wheel = [] if install is not None else [WHEEL_FOLDER / wheel_name()]
    files = classroom_files(items, install or wheel_install(wheel_name()))
    written = write_files(folder, files, force=force, also=wheel)
    if wheel:
        written.append(write_wheel(folder / WHEEL_FOLDER))
    console.classroom_written(written, [(e.id, max_points(e)) for e in exercises])


@app.command()
def result(
    ctx: typer.Context,
    exercise_id: Annotated[
        str,
        typer.Argument(metavar="EXERCISE", help="Exercise id.", autocompletion=complete_exercise),
    ],
    report: Annotated[
        Path,
        typer.Argument(metavar="REPORT.json", help="What `trainer check EXERCISE --json` printed."),
    ],
    workspace: WorkspaceOption = None,
    exercises_dir: ExercisesDirOption = None,
) -> None:
    """Print a check's points as the step output Classroom's reporter reads.

    One line, result=<base64 of the JSON>, for $GITHUB_OUTPUT; the stages and their
    points go to stderr (the step's log). A missing, empty or malformed report is
    an error worth 0 points, never a pass; so is a scratch file that is a symlink or
    lies outside the repository (run it at the repository's top). Exit code 0
    whatever the verdict.

    Example: trainer classroom result sigmoid .trainer-results/sigmoid.json >> "$GITHUB_OUTPUT"
    """
    from trainer.classroom import (
        NoReport,
        classroom_result,
        output_line,
        read_report,
        scratch_flags,
    )

    # Whatever opening the session prints (an interview's summary) goes to the log:
    # stdout is the step's output, where one stray line fails the step.
    with contextlib.redirect_stdout(sys.stderr):
        session = open_session(ctx, workspace, exercises_dir)
        exercise = session.catalog.get(exercise_id)
    # Run at the repository's top (the workflow does): a scratch file that is a symlink,
    # or outside the repository, is not the student's work and scores 0.
    flags = scratch_flags(session.workspace.scratch_path(exercise.id), Path.cwd())
    try:
        document = classroom_result(exercise, read_report(report, exercise.id), flags=flags)
    except NoReport as problem:
        reason = str(problem)
        scratch = session.workspace.scratch_path(exercise.id)
        if not scratch.is_file():
            with contextlib.suppress(ValueError):
                scratch = scratch.absolute().relative_to(Path.cwd())
            reason += (
                f"; there is no scratch file at {scratch}: write your backward there "
                f"(trainer start {exercise.id}), then commit and push it"
            )
        document = classroom_result(exercise, None, reason)
    console.classroom_result(document)
    console.plain(output_line(document))
