"""Bugs of ours, injected by the tests at real code paths of the engine.

The checking server is a process of its own (and the checker and the learner's
process are forks of it), so a fault is put there by the code the server's
interpreter runs first: :func:`with_fault` wraps the CLI's
:func:`trainer.checking.server.bootstrap` so that it replaces one function of
ours with one that raises, before the server starts. The trainer itself has no
hook for it: only a test, in the CLI's own process, can do this; a learner's
code runs long after, in a process of its own.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path

# What an injected fault says: a test finds it in the traceback kept for the bug report.
FAULT_WORDS = "a fault injected by the tests"

# Where each fault goes: `module:function` or `module:Class.method`, a real code path.
PLACES = {
    # The body of the backward parity stage.
    "stage body": "trainer.checking.trusted.backward:backward_stage",
    # The checker's proxy Function, in its backward: run by torch's autograd for a stage.
    "proxy backward": "trainer.checking.trusted.proxy:refusal",
    # The checker between two stages, outside any stage's body.
    "checker": "trainer.checking.trusted.proxy:Sandbox.reset",
    # The checker, before the check begins (it asks the zygote for the learner's process).
    "checker start": "trainer.checking.trusted.proxy:Sandbox.start",
    # The checking server, before it is ready (it imports and warms up the stages).
    "server start": "trainer.checking.trusted.checker:warm_up",
    # The checking server, serving: it hands each job its plan before forking its checker.
    "server": "trainer.checking.server:plan_for",
    # A learner-side handler: the forward request, after the learner's forward returned.
    "learner handler": "trainer.checking.learner.serve:_advice",
    # A learner-side handler of api_calls.py: mark_dirty's request, as it makes its leaves,
    # before any learner code.
    "learner api handler": "trainer.checking.protocol:leaves",
}


def server_code(target: str, returns: str | None = None) -> str:
    """Python that replaces ``target`` with a function that raises (or, with ``returns``,
    that returns that expression: a value our code cannot send, say)."""
    module, _, attribute = target.partition(":")
    owner, _, name = attribute.rpartition(".")
    body = f"return {returns}" if returns is not None else f"raise RuntimeError({FAULT_WORDS!r})"
    return textwrap.dedent(
        f"""
        import importlib as _importlib
        def _fault(*args, **kwargs):
            {body}
        _module = _importlib.import_module({module!r})
        setattr(getattr(_module, {owner!r}) if {owner!r} else _module, {name!r}, _fault)
        """
    )


Bootstrap = Callable[..., str]


def with_fault(original: Bootstrap, code: str) -> Bootstrap:
    """The server's bootstrap, with ``code`` run first (after the package is importable)."""

    def bootstrap(root: str, control_fd: int, path: Sequence[str] = ()) -> str:
        prefix = f"import sys\nsys.path.insert(0, {root!r})\n{code}\n"
        return prefix + original(root, control_fd, path)

    return bootstrap


def sitecustomize(folder: Path, code: str) -> Path:
    """A ``sitecustomize.py`` in ``folder`` that injects ``code`` into every checking server
    the CLI starts: for a `trainer` run as a process of its own (in a pseudo-terminal),
    with ``folder`` first on its PYTHONPATH."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(
        textwrap.dedent(
            f"""
            import trainer.checking.server as _server
            from tests.faults import with_fault as _with_fault

            _server.bootstrap = _with_fault(_server.bootstrap, {code!r})
            """
        )
    )
    return folder
