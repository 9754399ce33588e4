"""The `trainer` command: the root of the command line, in typer's and click's own terms.

The commands live in three modules, each a typer app of its own:
:mod:`trainer.cli_learn` (the learner's session), :mod:`trainer.cli_check`
(`check` and `watch`, which run checks) and :mod:`trainer.cli_author`
(`validate`, `new`, `grade`). The root is a typer app whose group class follows
click's documented lazy-loading pattern: `trainer CMD` imports only the module
that defines CMD and builds only its parsers, so start-up stays fast; `--help`
and shell completion load them all.

Expected failures (:class:`~trainer.errors.TrainerError`) are caught here, once,
and printed as one line on stderr with their exit code.

No `from __future__ import annotations` in the CLI modules: typer would then
evaluate every annotation string of every command at each start.
"""

import difflib
import functools
import importlib
from typing import Annotated, Any

import click
import typer
from typer.core import TyperGroup

import trainer
from trainer import console
from trainer.cli_common import (
    ExercisesDirOption,
    SharedOptions,
    WorkspaceOption,
)
from trainer.errors import ExitCode, SpecFieldError, TrainerError

# Where each command is defined, in the order `trainer --help` lists them. A test
# holds this table and the modules' own commands to the same names.
COMMAND_MODULES = {
    "start": "trainer.cli_learn",
    "check": "trainer.cli_check",
    "hint": "trainer.cli_learn",
    "quiz": "trainer.cli_learn",
    "list": "trainer.cli_learn",
    "next": "trainer.cli_learn",
    "open": "trainer.cli_learn",
    "watch": "trainer.cli_check",
    "reset": "trainer.cli_learn",
    "solution": "trainer.cli_learn",
    "interview": "trainer.cli_learn",
    "validate": "trainer.cli_author",
    "new": "trainer.cli_author",
    "grade": "trainer.cli_author",
}

SPEC_ADVICE = "Fix that field of the spec; docs/spec-format.md describes every field."


@functools.cache
def _commands_of(module_name: str) -> click.Command:
    """The click form of one command module's typer app (built on first use)."""
    module = importlib.import_module(module_name)
    return typer.main.get_command(module.app)


class LazyGroup(TyperGroup):
    """click's lazy group: commands are imported when they are invoked or listed."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMAND_MODULES)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module_name = COMMAND_MODULES.get(cmd_name)
        if module_name is None:
            return None
        commands = _commands_of(module_name)
        if isinstance(commands, click.Group):
            return commands.get_command(ctx, cmd_name)
        return commands if commands.name == cmd_name else None

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        try:
            return click.Group.resolve_command(self, ctx, args)
        except click.UsageError as error:
            # One suggestion (click and typer would each add theirs from the commands
            # already loaded, which here are none).
            close = difflib.get_close_matches(args[0], list(COMMAND_MODULES), n=1) if args else []
            if not close or "Did you mean" in error.message:
                raise
            message = f"{error.message.rstrip('.')}. Did you mean '{close[0]}'?"
            raise click.UsageError(message, error.ctx) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except TrainerError as problem:
            advice = f". {SPEC_ADVICE}" if isinstance(problem, SpecFieldError) else ""
            console.error(problem.message + advice)  # the file and field first, then what to do
            raise typer.Exit(problem.exit_code) from None
        except KeyboardInterrupt:
            console.error("interrupted.")
            raise typer.Exit(ExitCode.INTERRUPTED) from None


app = typer.Typer(
    name="trainer",
    cls=LazyGroup,
    help="Practise writing backward passes of custom torch.autograd.Function classes.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


def _show_version(value: bool) -> None:
    if value:
        console.plain(f"trainer {trainer.__version__}")
        raise typer.Exit()


@app.callback()
def _shared_options(
    ctx: typer.Context,
    workspace: WorkspaceOption = None,
    exercises_dir: ExercisesDirOption = None,
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Show the version and exit.", callback=_show_version, is_eager=True
        ),
    ] = False,
) -> None:
    """Practise writing backward passes of custom torch.autograd.Function classes.

    --workspace and --exercises-dir are accepted here, before the command, and after
    it, by every command.
    """
    ctx.obj = SharedOptions(workspace=workspace, exercises_dirs=list(exercises_dir or []))


def main() -> None:
    """The console script."""
    app(prog_name="trainer")
