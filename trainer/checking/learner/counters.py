"""The counters a learner's file keeps between calls, and moving them far ahead.

A training run calls a Function millions of times; the checker calls it a few hundred.
A backward that goes wrong only after N calls (``if calls > 1000``) would pass any fixed
number of calls. So, by construction instead: the ints one call moves, in the file's
module, its classes and the lists, dicts and plain objects they hold (a few levels
down), are the file's counters; moved a billion ahead (behind, for one that counts
down), they are where a long run leaves them, and the next call's gradient must not
change. Only ints count (a bool, a float statistic or a tensor is no call count), and
only ints the call moved: a constant is left alone.

This runs in the learner's process, as the rest of the calls do; what it finds only
changes which calls the learner's code makes, and the gradients are compared in the
checker.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

AHEAD = 10**9  # how far a long run moves a counter: past any threshold a file could test
DEPTH = 3  # containers below the module or a class that are searched
MOST = 200  # counters moved at once, at most: a file's state, not a dataset
WIDEST = 1_000  # members of one list or dict searched: a table of values is no counter
NAMED = 60  # characters of a counter's place said in the report


@dataclass(frozen=True)
class Counter:
    """An int at one place: ``name`` says where, ``put`` stores a new value there."""

    name: str
    value: int
    put: Callable[[int], None]


def ints(module: types.ModuleType | None, classes: tuple[type, ...]) -> dict[str, Counter]:
    """Every int held by the module's globals (not dunder names), the attributes of
    ``classes`` and of the module's own classes, or by a list, dict or plain object
    below them, by where it is."""
    found: dict[str, Counter] = {}
    seen: set[int] = set()
    name = module.__name__ if module is not None else None
    own = [
        value
        for value in (dict(vars(module)).values() if module is not None else ())
        if isinstance(value, type) and getattr(value, "__module__", None) == name
    ]
    roots: list[tuple[str, Any]] = [(c.__qualname__, c) for c in dict.fromkeys([*classes, *own])]
    if module is not None:
        roots.append(("", module))
    for name, root in roots:
        _visit(root, name, 0, seen, found)
    return found


def moved(before: dict[str, Counter], after: dict[str, Counter]) -> list[tuple[Counter, int]]:
    """The counters a call moved, each with where a long run leaves it."""
    out = []
    for name, now in after.items():
        then = before.get(name)
        if then is not None and now.value != then.value:
            step = 1 if now.value > then.value else -1
            out.append((now, now.value + step * AHEAD))
    return out[:MOST]


def _visit(obj: Any, name: str, depth: int, seen: set[int], found: dict[str, Counter]) -> None:
    if id(obj) in seen or depth > DEPTH:
        return
    seen.add(id(obj))
    for value, label, put in _members(obj, name):
        if type(value) is int:
            found[label] = Counter(label, value, put)
        elif _searched(value):
            _visit(value, label, depth + 1, seen, found)


def _members(obj: Any, name: str) -> Iterator[tuple[Any, str, Callable[[int], None]]]:
    """(value, where, how to store there) of each member; the containers' own
    methods, which a file may override, are never called."""
    if isinstance(obj, dict):
        for key, value in list(dict.items(obj))[:WIDEST]:
            shown = repr(key) if type(key) in (str, int) else "…"
            yield value, f"{name}[{shown}]"[:NAMED], _dict_put(obj, key)
    elif isinstance(obj, list):
        for index, value in enumerate(list.copy(obj)[:WIDEST]):
            yield value, f"{name}[{index}]", _list_put(obj, index)
    else:
        try:
            members = dict(vars(obj))
        except TypeError:  # no __dict__
            return
        module = isinstance(obj, types.ModuleType)
        for key, value in members.items():
            if not isinstance(key, str) or key.startswith("__"):
                continue
            where = key if module else f"{name}.{key}"
            yield value, where[:NAMED], _attribute_put(obj, key)


def _searched(value: Any) -> bool:
    """Containers a counter may sit in: lists, dicts and instances of the file's own
    plain classes (not modules, classes, functions or torch's objects)."""
    if isinstance(value, dict | list):
        return True
    kind = type(value)
    if isinstance(value, type | types.ModuleType | types.FunctionType | types.BuiltinFunctionType):
        return False
    module = getattr(kind, "__module__", "") or ""
    return hasattr(value, "__dict__") and not module.startswith(("torch", "builtins", "numpy"))


def _dict_put(obj: dict[Any, Any], key: Any) -> Callable[[int], None]:
    return lambda value: dict.__setitem__(obj, key, value)


def _list_put(obj: list[Any], index: int) -> Callable[[int], None]:
    return lambda value: list.__setitem__(obj, index, value)


def _attribute_put(obj: Any, key: str) -> Callable[[int], None]:
    if isinstance(obj, type):
        return lambda value: type.__setattr__(obj, key, value)
    if isinstance(obj, types.ModuleType):
        return lambda value: vars(obj).__setitem__(key, value)
    return lambda value: object.__setattr__(obj, key, value)
