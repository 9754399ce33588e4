"""The `trainer` commands, one module each, each a typer app of its own.

:mod:`trainer.cli` loads only the module of the command invoked.
:mod:`trainer.commands.common` holds what they share.
"""
