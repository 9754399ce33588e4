"""The learner's answer, in each form an exercise may ask for: one adapter per form.

* ``function``: a subclass of ``torch.autograd.Function`` with static ``forward`` and
  ``backward`` (and, for the Function API's exercises, ``setup_context``, ``jvp``, ...);
* ``custom_op``: an op made with ``torch.library.custom_op``, whose gradient is given
  with ``register_autograd(backward, setup_context=...)``.

Everything else in the learner's process calls the answer through :class:`Answer`
(``apply``, ``owns``, ``watch_with``...): nothing outside this module knows that an
answer is a class. Only the Function API's stages, which teach the class itself, ask
for :attr:`Answer.function_class`. (The formula a learner writes on the whiteboard is
a third form, checked by ``trainer derive`` with a grammar of its own, without a
learner's process: no code of the learner's runs.)
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from trainer.checking.learner.derivation import DerivationWatch
from trainer.checking.learner.loading import (
    Expected,
    LearnerProblem,
    find_function_class,
    recorded_by,
)
from trainer.checking.wording import foreign_graph

FORMS = ("function", "custom_op")


class Answer:
    """The learner's answer to an exercise, as the learner's process calls it."""

    form = "function"

    def __init__(self, name: str) -> None:
        self.name = name

    @property
    def function_class(self) -> type[torch.autograd.Function] | None:
        """The Function class, for the stages that teach the Function API (None in
        other forms: those stages do not apply to them)."""
        return None

    @property
    def custom_op(self) -> Any:
        """The op, for the stages that check a custom op's registration (opcheck)."""
        return None

    def apply(self, *args: Any) -> Any:
        """forward on ``args`` as a network calls it, recording the answer's backward."""
        raise NotImplementedError

    def owns(self, node: object) -> bool:
        """Whether graph node ``node`` calls this answer's backward."""
        raise NotImplementedError

    def optional_inputs(self) -> int:
        """How many of forward's parameters have defaults (backward may return a trailing
        None for each); -1: any number (``*args``)."""
        return 0

    def watch_with(self, watch: DerivationWatch, also: bool = False) -> None:
        """Have ``watch`` watch every call of the answer's code (with ``also``, as well as
        the answers it watched before: a fresh copy of the file)."""
        raise NotImplementedError

    def call_backward(self, node: Any, grads: list[Any]) -> Any:
        """The answer's backward called directly through its graph node ``node``, as
        autograd's engine calls it: what the learner's backward returned."""
        with torch.no_grad():
            return node.apply(*grads)

    def own_graph(self, outputs: list[Any]) -> list[Any]:
        """``outputs`` of :meth:`apply`, refused (RuntimeError) when their graph node is not
        the answer's own: their gradient would not come from its backward."""
        node = next(
            (o.grad_fn for o in outputs if isinstance(o, torch.Tensor) and o.grad_fn is not None),
            None,
        )
        if node is not None and not self.owns(node):
            raise RuntimeError(foreign_graph(self.name))
        return outputs


class FunctionAnswer(Answer):
    """A ``torch.autograd.Function`` subclass."""

    form = "function"

    def __init__(self, function_class: type[torch.autograd.Function]) -> None:
        super().__init__(function_class.__name__)
        self._class = function_class

    @property
    def function_class(self) -> type[torch.autograd.Function]:
        return self._class

    def apply(self, *args: Any) -> Any:
        return self._class.apply(*args)  # type: ignore[no-untyped-call]

    def owns(self, node: object) -> bool:
        return recorded_by(node, self._class)

    def optional_inputs(self) -> int:
        return _defaulted(getattr(self._class, "forward"))  # noqa: B009

    def watch_with(self, watch: DerivationWatch, also: bool = False) -> None:
        watch.adopt(self._class, also=also)


class CustomOpAnswer(Answer):
    """An op made with ``torch.library.custom_op``, its gradient registered with
    ``register_autograd``. Its graph node is the Function torch generates for the op,
    which calls the registered backward."""

    form = "custom_op"

    def __init__(self, name: str, op: Any) -> None:
        super().__init__(name)
        self._op = op
        overload = op._opoverload
        self._node_name = (
            f"GeneratedBackwardFor_{overload._namespace}_{overload._opname}_"
            f"{overload._overloadname}Backward"
        )

    @property
    def custom_op(self) -> Any:
        return self._op

    def apply(self, *args: Any) -> Any:
        return self._op(*args)

    def owns(self, node: object) -> bool:
        klass = node if isinstance(node, type) else type(node)
        forward_class = vars(klass).get("_forward_cls")
        return (
            klass.__bases__ == (torch.autograd.function.BackwardCFunction,)
            and klass.__name__ == self._node_name
            and isinstance(forward_class, type)
            and forward_class.__module__ == "torch._library.autograd"
        )

    def optional_inputs(self) -> int:
        return _defaulted(self._op._init_fn)

    def watch_with(self, watch: DerivationWatch, also: bool = False) -> None:
        watch.adopt_custom_op(self._op)

    def call_backward(self, node: Any, grads: list[Any]) -> Any:
        # torch's generated Function adds one input of its own (the call's metadata) and
        # one None for it to what the registered backward returns.
        returned = super().call_backward(node, grads)
        if isinstance(returned, tuple) and returned and returned[-1] is None:
            returned = returned[:-1]
        return returned[0] if isinstance(returned, tuple) and len(returned) == 1 else returned


@contextlib.contextmanager
def fresh_copy(expected: Expected) -> Iterator[None]:
    """Around a second import of the learner's file (a fresh copy, without the state of
    earlier calls): torch registers a custom op's name once per process, so the copy's
    ops get names of their own. Nothing changes for a Function class."""
    if expected.form != "custom_op":
        yield
        return
    _COPIES.append(True)
    suffix = f"fresh{len(_COPIES)}"
    original = torch.library.custom_op

    def renamed(name: str, *args: Any, **kwargs: Any) -> Any:
        return original(f"{name}_{suffix}", *args, **kwargs)

    torch.library.custom_op = renamed
    try:
        yield
    finally:
        torch.library.custom_op = original


_COPIES: list[bool] = []


def find_answer(module: ModuleType, expected: Expected, path: Path) -> Answer:
    """The answer the learner's module defines, in the exercise's form; a
    :class:`LearnerProblem` saying what is wrong when there is none."""
    if expected.form == "custom_op":
        return _find_custom_op(module, expected, path)
    return FunctionAnswer(find_function_class(module, expected, path))


def _find_custom_op(module: ModuleType, expected: Expected, path: Path) -> CustomOpAnswer:
    from torch._library.custom_ops import CustomOpDef

    name = expected.class_name
    candidate = vars(module).get(name)
    if candidate is None:
        ops = [k for k, v in vars(module).items() if isinstance(v, CustomOpDef)]
        found = ", ".join(f"`{k}`" for k in ops) if ops else "no custom ops"
        raise LearnerProblem(f"no op `{name}` in {path.name}; found: {found}.")
    if not isinstance(candidate, CustomOpDef):
        raise LearnerProblem(
            f"`{name}` in {path.name} is a {type(candidate).__name__}, not a custom op: "
            f'decorate it with @torch.library.custom_op("mylib::{name}", mutates_args=()).'
        )
    if getattr(candidate, "_backward_fn", None) is None:
        raise LearnerProblem(
            f"`{name}` has no gradient registered: call "
            f"`{name}.register_autograd(backward, setup_context=setup_context)`."
        )
    return CustomOpAnswer(name, candidate)


def _defaulted(forward: Any) -> int:
    try:
        parameters = inspect.signature(forward).parameters.values()
    except (TypeError, ValueError):
        return 0
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in parameters):
        return -1
    # Keyword-only ones too: autograd takes a trailing None for each as it does for any.
    return sum(1 for p in parameters if p.default is not inspect.Parameter.empty)
