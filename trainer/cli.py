"""The `trainer` command: the root of the command line, in typer's and click's own terms.

Each command is a typer app of its own, one module each in :mod:`trainer.commands`
(what they share is in :mod:`trainer.commands.common`). The root is a typer app
whose group class follows click's documented lazy-loading pattern: `trainer CMD`
imports only the module of CMD and builds only its parser, so start-up stays
fast; `--help` and shell completion load them all. The table below says which
module holds which command, in the order `trainer --help` lists them.

Expected failures (:class:`~trainer.errors.TrainerError`) are caught here, once,
and printed as one line on stderr with their exit code. Anything else that
escapes a command is a bug of ours (:mod:`trainer.bugs`): its traceback goes to
a file, whose path is printed with the words, and the exit code is 3.

No `from __future__ import annotations` in the CLI modules: typer would then
evaluate every annotation string of every command at each start.
"""

import difflib
import functools
import importlib
import select
import sys
import traceback
from typing import Annotated, Any, NoReturn

import click
import typer
from typer.core import TyperGroup

import trainer
from trainer import console
from trainer.bugs import CheckerBugError, last_line, write_bug_report
from trainer.commands.common import (
    ExercisesDirOption,
    SharedOptions,
    WorkspaceOption,
)
from trainer.errors import SPEC_ADVICE, ExitCode, SpecFieldError, TrainerError

# Where each command is defined, in the order `trainer --help` lists them. A test
# holds each module to defining exactly its command (or a group of its own subcommands,
# as `classroom` is).
COMMAND_MODULES = {
    "start": "trainer.commands.start",
    "check": "trainer.commands.check",
    "plot": "trainer.commands.plot",
    "hint": "trainer.commands.hint",
    "quiz": "trainer.commands.quiz",
    "derive": "trainer.commands.derive",
    "followup": "trainer.commands.followup",
    "list": "trainer.commands.list_exercises",
    "next": "trainer.commands.next_exercise",
    "plan": "trainer.commands.plan",
    "review": "trainer.commands.review",
    "stats": "trainer.commands.stats",
    "open": "trainer.commands.open_scratch",
    "watch": "trainer.commands.watch",
    "reset": "trainer.commands.reset",
    "solution": "trainer.commands.solution",
    "explain": "trainer.commands.explain",
    "interview": "trainer.commands.interview",
    "validate": "trainer.commands.validate",
    "new": "trainer.commands.new",
    "grade": "trainer.commands.grade",
    "grade-merge": "trainer.commands.grade_merge",
    "classroom": "trainer.commands.classroom",
    "wheel": "trainer.commands.wheel",
}


@functools.cache
def command_of(module_name: str) -> click.Command:
    """The click command of one command module's typer app (built on first use)."""
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
        return command_of(module_name)

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
        except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise  # click's own: usage errors, exits, aborted prompts
        except CheckerBugError as bug:  # the checking server's, as it sent it
            _bug(bug.where, bug.traceback)
        except BrokenPipeError:
            if not _reader_gone():
                _bug(f"`trainer {ctx.invoked_subcommand}`", traceback.format_exc())
            raise  # `trainer list | head`: click ends quietly, exit code 1
        except Exception:  # a bug of ours in the command itself
            _bug(f"`trainer {ctx.invoked_subcommand}`", traceback.format_exc())


def _reader_gone() -> bool:
    """Whether what reads this process's output has stopped reading (``| head`` ended): a
    pipe without a reader reports an error when polled. A broken pipe elsewhere (the
    checking server's) is a bug."""
    try:
        poll = select.poll()
        poll.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poll.poll(0))
    except (AttributeError, OSError, ValueError):
        return False


def _bug(where: str, text: str) -> NoReturn:
    """Keep the traceback for a bug report, say so in a bug's words, exit 3."""
    path = write_bug_report(where, text)
    console.checker_bug(where, path, last_line(text))
    raise typer.Exit(ExitCode.CHECKER_BUG) from None


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
    """Keep the options given before the command for the command (``ctx.obj``); every
    command takes them after its name too, where they win."""
    ctx.obj = SharedOptions(workspace=workspace, exercises_dirs=list(exercises_dir or []))


def main() -> None:
    """The console script."""
    app(prog_name="trainer")
