"""Detect and undo a learner's patches to torch and to the checker's modules.

Runs in the learner's process. Verdicts are computed in the checking process,
which the learner's code never touches, so a patch cannot make a wrong answer
pass; but a patch is never part of a correct solution either. Before the
learner's file runs we record the namespaces; after each call we compare,
restore anything changed and report the names, and the stage fails.
"""

from __future__ import annotations

import sys
from types import ModuleType

_MISSING = object()

# Modules whose attributes the checker (or torch's own checkers) look up at call time.
GUARDED_MODULES = (
    "builtins",
    "math",
    "json",
    "os",
    "numpy",
    "torch",
    "torch.nn.functional",
    "torch.autograd",
    "torch.autograd.function",
    "torch.autograd.gradcheck",
    "torch.autograd.grad_mode",
    "torch.testing",
    "torch.functional",
    "torch._tensor",
)


class NamespaceGuard:
    """A snapshot of module and class namespaces that can be verified and restored."""

    def __init__(self, modules: list[ModuleType], classes: list[type]) -> None:
        self._modules = {m.__name__: (m, dict(vars(m))) for m in modules}
        self._classes = {_qualname(c): (c, dict(vars(c))) for c in classes}

    @classmethod
    def for_checker(cls, classes: list[type]) -> NamespaceGuard:
        names = [*GUARDED_MODULES, *(n for n in sys.modules if n.startswith("trainer"))]
        modules = [sys.modules[n] for n in names if n in sys.modules]
        return cls(modules, classes)

    def restore(self) -> list[str]:
        """Undo every patch; return the patched names (empty when nothing changed)."""
        patched: list[str] = []
        for name, (module, saved) in self._modules.items():
            current = vars(module)
            for key, value in saved.items():
                if current.get(key, _MISSING) is not value:
                    patched.append(f"{name}.{key}")
                    setattr(module, key, value)
        for name, (klass, saved) in self._classes.items():
            current = dict(vars(klass))
            for key, value in saved.items():
                if current.get(key, _MISSING) is not value:
                    patched.append(f"{name}.{key}")
                    setattr(klass, key, value)
            # On a class an added attribute can shadow an inherited method.
            for key in current.keys() - saved.keys():
                patched.append(f"{name}.{key}")
                delattr(klass, key)
        return sorted(patched)


def _qualname(klass: type) -> str:
    module = klass.__module__
    if module == "torch._tensor":
        module = "torch"
    if module == "torch.autograd.function":
        module = "torch.autograd"
    return f"{module}.{klass.__qualname__}"
