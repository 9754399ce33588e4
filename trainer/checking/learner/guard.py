"""Detect and undo a learner's patches to torch.

Runs in the learner's process. Verdicts are computed in the checking process,
which the learner's code never touches, so a patch cannot make a wrong answer
pass; but a patch is never part of a correct solution either. Before the
learner's file runs we record the namespaces; after each call we compare,
restore anything changed and report the names that the learner's code
replaced, and the stage fails.

torch rebinds some of its own names lazily (``torch.set_default_dtype``
replaces ``torch.Storage``, the first use of ``torch.func`` replaces
``torch.manual_seed``): a replacement that is itself torch's own object is
torch's doing, and is kept without blame.
"""

from __future__ import annotations

import ctypes
import gc
import operator
import sys
from collections.abc import Callable, Mapping
from itertools import repeat
from types import ModuleType
from typing import Any

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
        # Each namespace's version (see _dict_version) when it was last found as saved:
        # while it has not changed since, there is nothing to compare.
        self._versions = {name: dict_version(vars(m)) for name, (m, _) in self._modules.items()}
        self._class_versions = {
            name: dict_version(_class_dict(c)) for name, (c, _) in self._classes.items()
        }
        # Every namespace's version tag, read in one C loop: restore runs after every
        # request, and most find nothing changed anywhere.
        namespaces: list[dict[str, Any] | None] = [vars(m) for m, _ in self._modules.values()]
        namespaces += [_class_dict(c) for c, _ in self._classes.values()]
        views = [_tag_view(namespace) for namespace in namespaces]
        self._tags = [v for v in views if v is not None] if None not in views else []
        self._seen = self._tags_now()

    def _tags_now(self) -> list[int] | None:
        return list(map(_TAG_VALUE, self._tags)) if self._tags else None

    @classmethod
    def for_torch(cls, classes: list[type]) -> NamespaceGuard:
        """The guard of torch's namespaces and ``classes``: the one :func:`prepare` made
        (in the zygote, before the fork) while not one of them has changed since, else a
        new one. Copying ~3,000 names in each learner process would touch, and so copy
        from the zygote, every page their objects sit on (~1,100 pages, ~2.5 ms)."""
        modules = [sys.modules[n] for n in GUARDED_MODULES if n in sys.modules]
        prepared = _PREPARED[0] if _PREPARED else None
        if prepared is not None and prepared._still_fits(modules, classes):
            return prepared
        return cls(modules, classes)

    def _still_fits(self, modules: list[ModuleType], classes: list[type]) -> bool:
        """Whether this guard's snapshot is what a new one would hold: the same modules
        and classes, not one namespace changed since (each version tag as it was)."""
        if [m.__name__ for m in modules] != list(self._modules) or [
            _qualname(c) for c in classes
        ] != list(self._classes):
            return False
        for name, (module, _) in self._modules.items():
            version = dict_version(vars(module))
            if (
                version is None
                or version != self._versions[name]
                or module is not sys.modules.get(name)
            ):
                return False
        for klass, (name, (saved_class, _)) in zip(classes, self._classes.items(), strict=True):
            version = dict_version(_class_dict(klass))
            if klass is not saved_class or version is None or version != self._class_versions[name]:
                return False
        return True

    def restore(self) -> list[str]:
        """Undo every patch; return the names the learner's code replaced."""
        tags = self._tags_now()  # before the comparisons: a change made while they run
        if tags is not None and tags == self._seen:  # shows next time
            return []  # not one namespace changed in any way since the last call
        self._seen = tags
        patched: list[str] = []
        for name, (module, saved) in self._modules.items():
            current = vars(module)
            # Read before the comparison: a change made while it runs shows next time.
            version = dict_version(current)
            if version is not None and version == self._versions[name]:
                continue  # not changed in any way since it was last found as saved
            self._versions[name] = version
            if _untouched(saved, current):
                continue
            for key, value in saved.items():
                now = current.get(key, _MISSING)
                if now is value:
                    continue
                if now is not _MISSING and _torchs_own(now):
                    saved[key] = now  # torch rebinding its own name: keep it
                    continue
                patched.append(f"{name}.{key}{_where(now)}")
                setattr(module, key, value)
        for name, (klass, saved) in self._classes.items():
            version = dict_version(_class_dict(klass))
            if version is not None and version == self._class_versions[name]:
                continue  # not changed in any way since it was last found as saved
            self._class_versions[name] = version
            if len(vars(klass)) == len(saved) and _untouched(saved, vars(klass)):
                continue  # nothing replaced, and (as many names) nothing added
            current = dict(vars(klass))
            for key, value in saved.items():
                now = current.get(key, _MISSING)
                if now is value:
                    continue
                if now is not _MISSING and _torchs_own(now):
                    saved[key] = now
                    continue
                patched.append(f"{name}.{key}{_where(now)}")
                setattr(klass, key, value)
            # On a class an added attribute can shadow an inherited method.
            for key in current.keys() - saved.keys():
                if _torchs_own(current[key]):
                    saved[key] = current[key]
                    continue
                patched.append(f"{name}.{key}{_where(current[key])}")
                delattr(klass, key)
        return sorted(patched)


# Where a dict's version tag sits, after its header and ``ma_used`` (CPython 3.10-3.13).
_TAG_OFFSET = 2 * ctypes.sizeof(ctypes.c_void_p) + ctypes.sizeof(ctypes.c_ssize_t)


def _version_reader() -> Callable[[dict[str, object]], int] | None:
    """What reads CPython's private version tag of a dict (PEP 509: every change of the
    dict gives it a new one), or None where it cannot be read, and then every call
    compares the names. Trusted only after trying it: the header must be where it is
    on CPython 3.10-3.13 (``ma_used`` gives the length) and the tag must change with
    each kind of change and with nothing else."""
    if sys.implementation.name != "cpython" or not (3, 10) <= sys.version_info[:2] <= (3, 13):
        return None
    used = 2 * ctypes.sizeof(ctypes.c_void_p)  # after ob_refcnt and ob_type
    tag = _TAG_OFFSET

    def read(namespace: dict[str, object]) -> int:
        return ctypes.c_uint64.from_address(id(namespace) + tag).value

    try:
        probes: list[dict[str, object]] = [{}, {"a": 1}, dict.fromkeys(map(str, range(50)))]
        if any(ctypes.c_ssize_t.from_address(id(p) + used).value != len(p) for p in probes):
            return None
        probe = probes[1]
        seen = [read(probe)]
        _ = probe.get("a"), list(probe), dict(probe)  # reading changes nothing
        seen.append(read(probe))
        probe["a"] = 2  # a new value, same key
        seen.append(read(probe))
        probe["b"] = 3
        seen.append(read(probe))
        del probe["b"]
        seen.append(read(probe))
        probe.update(c=4)
        seen.append(read(probe))
        probe.pop("c")
        seen.append(read(probe))
        if seen[0] != seen[1] or len(set(seen[1:])) != len(seen) - 1:
            return None
    except (ValueError, OSError):
        return None
    return read


_read_version = _version_reader()
_TAG_VALUE = operator.attrgetter("value")


def _tag_view(namespace: dict[str, Any] | None) -> ctypes.c_uint64 | None:
    """The version tag of ``namespace`` as a view of its memory (reading ``.value`` reads
    it afresh), where :func:`_version_reader` trusted where it sits; else None."""
    if namespace is None or _read_version is None:
        return None
    return ctypes.c_uint64.from_address(id(namespace) + _TAG_OFFSET)


def dict_version(namespace: dict[str, Any] | None) -> int | None:
    """CPython's version tag of a dict (PEP 509), or None where it cannot be read."""
    if namespace is None or _read_version is None:
        return None
    return _read_version(namespace)


def _class_dict(klass: type) -> dict[str, object] | None:
    """The dict behind a class's ``__dict__`` proxy (whose version tag can be read)."""
    found = gc.get_referents(vars(klass))
    return found[0] if len(found) == 1 and type(found[0]) is dict else None


# The guard the zygote prepared before forking (see prepare): at most one.
_PREPARED: list[NamespaceGuard] = []


def prepare(classes: list[type]) -> None:
    """In the zygote: make the guard every learner process will start with, so that
    each finds it made (:meth:`NamespaceGuard.for_torch`) rather than copying every
    name. Made again after the zygote imports modules for checks."""
    _PREPARED.clear()
    _PREPARED.append(NamespaceGuard.for_torch(classes))


def guarded_classes() -> list[type]:
    """The classes whose namespaces the guard keeps: BackwardCFunction's ``apply`` is
    what calls the recorded Function's backward; and the classes of ours registered with
    :func:`also_guard` (the derivation watch's, whose methods a submission that found
    them could otherwise replace)."""
    import torch

    return [
        torch.Tensor,
        torch.autograd.Function,
        torch.autograd.function.BackwardCFunction,
        *_ALSO,
    ]


_ALSO: list[type] = []


def also_guard(*classes: type) -> None:
    """Keep these classes' namespaces too (registered once, at their module's import)."""
    _ALSO.extend(c for c in classes if c not in _ALSO)


def _untouched(saved: dict[str, object], current: Mapping[str, object]) -> bool:
    """Whether each saved name is still bound to the very object saved (names added
    since are not looked at): then :meth:`NamespaceGuard.restore` has nothing to do.

    It runs after every call of the learner's code, over ~3,000 names: in C, not in a
    Python loop. The same names in the same order (the usual case) compare by identity
    alone; otherwise each saved name is looked up, as the full loop would.
    """
    if len(current) == len(saved) and all(map(operator.is_, current, saved)):
        return all(map(operator.is_, current.values(), saved.values()))
    now = map(current.get, saved, repeat(_MISSING))
    return all(map(operator.is_, now, saved.values()))


def _torchs_own(value: object) -> bool:
    """True for an object defined by torch itself (a function, a class, or an instance of one)."""
    module = getattr(value, "__module__", None)
    if not isinstance(module, str):
        module = getattr(type(value), "__module__", "") or ""
    return module == "torch" or module.startswith("torch.")


def _where(value: object) -> str:
    """Where the replacement was written, when it is a function of the learner's."""
    code = getattr(getattr(value, "__func__", value), "__code__", None)
    filename = getattr(code, "co_filename", "")
    if not filename or filename.startswith("<"):
        return ""
    return f" (by {filename.rsplit('/', 1)[-1]}, line {code.co_firstlineno})"  # type: ignore[union-attr]


def _qualname(klass: type) -> str:
    module = klass.__module__
    if module == "torch._tensor":
        module = "torch"
    if module == "torch.autograd.function":
        module = "torch.autograd"
    return f"{module}.{klass.__qualname__}"
