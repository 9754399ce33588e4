"""Load a learner's scratch file and check the structure of its Function class.

Runs in the learner's process only. Every problem becomes a :class:`LearnerProblem`
whose message names what is missing or where the error is, in the learner's
own file, with frames of the checker and of torch cut away.
"""

from __future__ import annotations

import difflib
import errno
import inspect
import os
import socket
import sys
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType, TracebackType
from typing import Any

import torch

from trainer.checking.learner import confine
from trainer.checking.wording import describe_exception, foreign_graph


@dataclass(frozen=True)
class Expected:
    """The little the learner's process knows of the exercise: what the class looks like."""

    class_name: str  # the answer's name in the file: the Function class, or the custom op
    param_names: tuple[str, ...]
    outputs: int = 1
    form: str = "function"  # see learner.answers


def module_name(path: Path) -> str:
    """The name ``import <stem>`` would give the file, as in a plain program; "solution"
    when that name is no identifier or names a module already imported, other than this
    file's own (a file called torch.py or copy.py must not stand in for the real one)."""
    stem = path.stem
    taken = sys.modules.get(stem)
    mine = taken is None or getattr(taken, "__file__", None) == str(path)  # a fresh copy
    return stem if stem.isidentifier() and mine else "solution"


def torchs(module: object) -> bool:
    """Whether a ``__module__`` is torch's own: ``torch`` or below it, not a learner's
    module whose name merely starts with the word (``torch_relu``)."""
    name = str(module)
    return name == "torch" or name.startswith("torch.")


class LearnerProblem(Exception):
    """The learner's code is not right; ``message`` says what, ``details`` shows where."""

    def __init__(self, message: str, details: list[str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or []


def learner_traceback(error: BaseException, path: Path) -> list[str]:
    """The traceback lines that point into the learner's file, innermost last."""
    lines: list[str] = []
    frames = traceback.extract_tb(error.__traceback__)
    for frame in frames:
        if Path(frame.filename) == path:
            lines.append(f"{path.name}, line {frame.lineno}, in {frame.name}")
            if frame.line:
                lines.append(f"    {frame.line.strip()}")
    return lines


def raised_in(error: BaseException, path: Path, function: str) -> bool:
    """True when the innermost frame of the learner's file is ``function``."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if Path(f.filename) == path]
    return bool(frames) and frames[-1].name == function


def _syntax_problem(error: SyntaxError, path: Path) -> LearnerProblem:
    details = []
    if error.text:
        line = error.text.rstrip("\n")
        stripped = line.lstrip()
        details.append(f"    {stripped}")
        if error.offset:
            caret = max(error.offset - (len(line) - len(stripped)) - 1, 0)
            details.append("    " + " " * caret + "^")
    return LearnerProblem(
        f"{type(error).__name__} in {path.name}, line {error.lineno}: {error.msg}", details
    )


def import_source(source: str, path: Path) -> ModuleType:
    """Execute the learner's source as a module named after nothing of ours."""
    source = source.replace("\r\n", "\n").replace("\r", "\n")
    if not source.strip():
        raise LearnerProblem(
            f"{path.name} is empty. Run `trainer start --force` to get the stub back "
            "(your file is backed up first)."
        )
    try:
        code = compile(source, str(path), "exec", dont_inherit=True)
    except SyntaxError as error:
        raise _syntax_problem(error, path) from None
    except ValueError as error:  # e.g. source with NUL bytes
        raise LearnerProblem(f"{path.name} cannot be compiled: {error}") from None

    name = module_name(path)
    module = ModuleType(name)
    module.__file__ = str(path)
    sys.modules[name] = module
    # A learner may keep helpers next to the scratch file.
    sys.path.insert(0, str(path.parent))
    try:
        exec(code, module.__dict__)
    except SystemExit as error:
        raise LearnerProblem(
            f"{path.name} called sys.exit({error.code!r}) while being imported. "
            "A scratch file should only define the class: move demo code under "
            '`if __name__ == "__main__":`.',
            learner_traceback(error, path),
        ) from None
    except RecursionError as error:
        raise LearnerProblem(
            f"{path.name} recursed too deeply while being imported.",
            learner_traceback(error, path)[-4:],
        ) from None
    except BaseException as error:  # the learner's code may raise anything
        what = (
            protection_words(error)
            or _helper_words(error, path)
            or (
                out_of_memory_words()
                if _out_of_memory(error)
                else f"raised {describe_exception(error)}"
            )
        )
        raise LearnerProblem(
            f"importing {path.name} {what}", learner_traceback(error, path)
        ) from None
    return module


# The cap on this process's memory, in MiB above what torch maps (set by the
# zygote; None when there is none), for the words of an out-of-memory error.
MEMORY_LIMIT_MB: int | None = None


def _out_of_memory(error: BaseException) -> bool:
    return isinstance(error, MemoryError) or "can't allocate memory" in str(error)


def _innermost_learner_frame(error: BaseException, path: Path) -> TracebackType | None:
    """The traceback entry of the innermost frame of the learner's file, if any."""
    innermost = None
    tb = error.__traceback__
    while tb is not None:
        if Path(tb.tb_frame.f_code.co_filename) == path:
            innermost = tb
        tb = tb.tb_next
    return innermost


def _jacobian_words(error: BaseException, path: Path) -> str | None:
    """An out-of-memory error in backward whose tensors are small: what ran out is of the
    order of their size squared, a materialised Jacobian. Told from the sizes of the
    tensors in the learner's failing frame and the cap, not from the error's words."""
    if not MEMORY_LIMIT_MB:
        return None
    innermost = _innermost_learner_frame(error, path)
    if innermost is None:
        return None
    try:
        sizes = [
            (int(v.numel()), int(v.element_size()))
            for v in innermost.tb_frame.f_locals.values()
            if isinstance(v, torch.Tensor)
        ]
    except Exception:  # the learner's locals may be anything
        return None
    if not sizes:
        return None
    n, size = max(sizes)
    cap = MEMORY_LIMIT_MB * 1024 * 1024
    if n * size * 64 > cap or n * n * size < cap // 4:
        return None  # the tensors themselves are large, or their square fits
    return (
        f"ran out of memory though its tensors hold {n:,} elements at most: it built "
        "something far larger, of the order of their size squared. A materialised Jacobian "
        "(diag_embed, an outer product, torch.eye(n))? Multiply grad_output through the "
        "Jacobian's formula instead of building the matrix"
    )


def out_of_memory_words() -> str:
    cap = (
        f"the check's cap of {MEMORY_LIMIT_MB} MiB above what torch itself uses"
        if MEMORY_LIMIT_MB
        else "the memory this machine has"
    )
    return (
        f"ran out of memory: it asked for more than {cap} (raise the cap with "
        "--memory-limit if that much is really needed)"
    )


def recorded_by(node: object, function_class: type) -> bool:
    """Whether ``node`` (a graph node, or its class) is the one autograd makes for
    ``function_class``: a plain subclass of torch's BackwardCFunction, made by the
    class statement, whose ``apply`` (torch's, guarded against patches) calls
    ``function_class``'s own backward. A node of another Function, or one whose
    class was changed to call something else, is not."""
    klass = node if isinstance(node, type) else type(node)
    return (
        klass.__bases__ == (torch.autograd.function.BackwardCFunction,)
        and vars(klass).get("_forward_cls") is function_class
        and set(vars(klass)) <= _NODE_CLASS_NAMES
        and vars(function_class).get("_backward_cls") is klass
    )


def own_graph(outputs: list[Any], function_class: type) -> list[Any]:
    """``outputs`` of ``function_class.apply``, refused (RuntimeError) when their graph
    node is not the class's own (:func:`recorded_by`): their gradient would not come
    from its backward. As the forward request refuses them, for every other call."""
    node = next(
        (o.grad_fn for o in outputs if isinstance(o, torch.Tensor) and o.grad_fn is not None),
        None,
    )
    if node is not None and not recorded_by(node, function_class):
        raise RuntimeError(foreign_graph(function_class.__name__))
    return outputs


def _node_class_names() -> frozenset[str]:
    """What this torch puts in the node class a class statement makes, found by making
    one here, before any learner code runs (the class is dropped at once)."""

    def identity(ctx: Any, value: Any) -> Any:
        return value

    made = type(
        "Probe",
        (torch.autograd.Function,),
        {"forward": staticmethod(identity), "backward": staticmethod(identity)},
    )
    names = frozenset(vars(vars(made)["_backward_cls"]))
    del made
    return names


_NODE_CLASS_NAMES = _node_class_names()


def _user_attribute(klass: type, name: str) -> Any:
    """``name`` as defined by the learner's class or its own bases, not by torch."""
    for base in klass.__mro__:
        if torchs(base.__module__):
            return None
        if name in vars(base):
            return vars(base)[name]
    return None


def _positional_counts(function: Any) -> tuple[int, int, bool]:
    """How many positional parameters: required, in all, and whether *args takes more."""
    signature = inspect.signature(function)
    required = total = 0
    variadic = False
    for parameter in signature.parameters.values():
        if parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD):
            total += 1
            required += parameter.default is parameter.empty
        elif parameter.kind is parameter.VAR_POSITIONAL:
            variadic = True
        elif parameter.kind is parameter.KEYWORD_ONLY and parameter.default is parameter.empty:
            required += 1_000  # a required keyword-only parameter: autograd never passes it
    return required, total, variadic


def _check_arity(class_name: str, method: str, function: Any, expected: list[str]) -> None:
    """The call autograd makes, ``method(*expected)``, must bind: extra parameters with
    defaults and ``*args`` are fine, as they are for torch."""
    required, total, variadic = _positional_counts(function)
    if required <= len(expected) and (len(expected) <= total or variadic):
        return
    count = min(required, 999) if required > total else total
    wanted = ", ".join(expected)
    raise LearnerProblem(
        f"`{class_name}.{method}` takes {count} positional parameter{'s' * (count != 1)} "
        f"but must take {len(expected)}: ({wanted})."
    )


def find_function_class(
    module: ModuleType, exercise: Expected, path: Path
) -> type[torch.autograd.Function]:
    name = exercise.class_name
    candidate = vars(module).get(name)
    if candidate is None:
        classes = [
            key
            for key, value in vars(module).items()
            if isinstance(value, type) and value.__module__ == module.__name__
        ]
        functions = [
            key for key in classes if issubclass(vars(module)[key], torch.autograd.Function)
        ]
        shown = functions or classes
        found = ", ".join(f"`{c}`" for c in shown) if shown else "no classes"
        close = difflib.get_close_matches(name, classes, n=1)
        advice = f" Rename `{close[0]}` to `{name}`." if close else ""
        raise LearnerProblem(f"no class `{name}` in {path.name}; found: {found}.{advice}")
    if not isinstance(candidate, type):
        raise LearnerProblem(
            f"`{name}` in {path.name} is a {type(candidate).__name__}, not a class."
        )
    if not issubclass(candidate, torch.autograd.Function):
        raise LearnerProblem(
            f"`{name}` does not subclass torch.autograd.Function. "
            f"Declare it as `class {name}(torch.autograd.Function):`."
        )
    if _user_attribute(candidate, "apply") is not None:
        raise LearnerProblem(
            f"`{name}` overrides `apply`. Autograd's own `apply` must run your forward and "
            "record your backward; remove the override."
        )
    if type(candidate) is not type(torch.autograd.Function):
        raise LearnerProblem(
            f"`{name}` has a metaclass of its own (`{type(candidate).__name__}`). Declare it "
            f"as a plain `class {name}(torch.autograd.Function):` so that autograd's own "
            "`apply` records your backward."
        )
    if not recorded_by(vars(candidate).get("_backward_cls"), candidate):
        raise LearnerProblem(
            f"`{name}`'s backward node class was replaced or changed (`_backward_cls`). "
            "Leave autograd's machinery alone: it must call your backward."
        )

    uses_setup_context = _user_attribute(candidate, "setup_context") is not None
    params = list(exercise.param_names)
    grads = (
        [f"grad_out{i + 1}" for i in range(exercise.outputs)]
        if exercise.outputs > 1
        else ["grad_output"]
    )
    expected = {
        "forward": params if uses_setup_context else ["ctx", *params],
        "backward": ["ctx", *grads],
    }
    # torch accepts `vjp` as the name of backward (one or the other, not both).
    backward_name = (
        "vjp"
        if _user_attribute(candidate, "backward") is None
        and _user_attribute(candidate, "vjp") is not None
        else "backward"
    )
    for method in ("forward", backward_name):
        raw = _user_attribute(candidate, method)
        if raw is None:
            raise LearnerProblem(
                f"`{name}` has no `{method}` method. Define it as a @staticmethod."
            )
        if not isinstance(raw, staticmethod | classmethod):
            raise LearnerProblem(
                f"`{name}.{method}` must be a @staticmethod: autograd calls "
                f"`{name}.{method}(ctx, ...)` without an instance."
            )
        # A classmethod works as torch binds it (the class first, then ctx): its call
        # is checked as the bound method's.
        _check_arity(
            name,
            method,
            getattr(candidate, method) if isinstance(raw, classmethod) else raw.__func__,
            expected["backward" if method == "vjp" else method],
        )
    return candidate


def learner_error(error: BaseException, path: Path, during: str) -> dict[str, Any]:
    """A reply's ``error`` for an exception of the learner's code: its words and the
    lines of the learner's file, and the mistake's id when the exception itself says
    which (the checker reads the id, never the words)."""
    message, details = explain_learner_error(error, path, during)
    mistake = "not_written" if _not_written(error, path) else ""
    if _saved_tensor_changed(error):
        mistake = "modifies_saved_tensor"
    return {"message": message, "details": details, "mistake": mistake}


def _saved_tensor_changed(error: BaseException) -> bool:
    """torch's refusal of a saved tensor whose version counter moved since it was saved."""
    return isinstance(error, RuntimeError) and "modified by an inplace operation" in str(error)


def _not_written(error: BaseException, path: Path) -> str | None:
    """The method that still raises the stub's NotImplementedError, if that is what this is."""
    if not isinstance(error, NotImplementedError):
        return None
    return next((m for m in ("backward", "vjp", "forward") if raised_in(error, path, m)), None)


def explain_learner_error(error: BaseException, path: Path, during: str) -> tuple[str, list[str]]:
    """Words for an exception that came out of the learner's forward or backward."""
    frames = learner_traceback(error, path)
    method = _not_written(error, path)
    if method is not None:
        return (
            f"{method}() is not written yet: it still raises NotImplementedError. "
            f"Write it in {path.name}, then run `trainer check` again.",
            [],
        )
    stopped = protection_words(error)
    if stopped:
        return f"{during} {stopped}", frames
    unsaved = _fewer_saved_than_read(error, path)
    if unsaved:
        return f"{during} {unsaved}", frames
    if _out_of_memory(error):
        jacobian = _jacobian_words(error, path) if during == "backward" else None
        return f"{during} {jacobian or out_of_memory_words()}", frames
    if _saved_tensor_changed(error):
        return (
            f"{during}: a tensor saved for backward was changed in place after it was saved "
            "(even if changed back: its version moved), so autograd refuses it the next "
            "time the graph is used (a second backward, retain_graph=True). Change only "
            "tensors backward made itself (clone first)",
            frames,
        )
    if isinstance(error, SystemExit):
        return f"your code called sys.exit({error.code!r}) during {during}", frames
    if isinstance(error, RecursionError):
        return f"{during} recursed without end (RecursionError)", frames[-4:]
    if frames:
        return f"{during} raised {describe_exception(error)}", frames
    # Raised by torch itself, after the learner's method returned.
    if during == "backward":
        return f"autograd rejected what backward returned: {describe_exception(error)}", []
    if during == "forward":
        return f"torch rejected what forward did: {describe_exception(error)}", []
    return f"{during} raised {describe_exception(error)}", []


def _fewer_saved_than_read(error: BaseException, path: Path) -> str | None:
    """The commonest beginner bug, named: backward unpacks or indexes ``ctx.saved_tensors``
    (a ValueError of unpacking, an IndexError) and forward saved fewer tensors than that
    (nothing, often: ``ctx.save_for_backward`` was never called). Told from the failing
    line of the learner's file and the ctx in that frame, not from the error's words."""
    if not isinstance(error, ValueError | IndexError):
        return None
    innermost = _innermost_learner_frame(error, path)
    if innermost is None:
        return None
    (failing,) = traceback.extract_tb(innermost, limit=1)
    if "saved_tensors" not in (failing.line or ""):
        return None
    ctx = innermost.tb_frame.f_locals.get("ctx")
    try:
        saved = len(ctx.saved_tensors) if ctx is not None else None
    except Exception:  # the learner's ctx may be anything
        saved = None
    what = (
        "nothing"
        if saved == 0
        else f"{saved} tensor{'s' * (saved != 1)}"
        if saved
        else "fewer tensors"
    )
    return (
        f"reads more from ctx.saved_tensors than forward saved ({what}): call "
        "ctx.save_for_backward(...) in forward with every tensor backward needs, in the "
        "order backward unpacks them"
    )


# -- host protection (issue 16): what it stopped, named ------------------------------------

WRITES_CONFINED = "writes are confined to the check's folder"
READS_CONFINED = "a check reads only what Python and torch need, and your file"
NO_NETWORK = "tried to use the network: a check runs without network or local sockets"
_NETWORK_ERRNOS = {errno.ENETUNREACH, errno.ENETDOWN, errno.EHOSTUNREACH, errno.EADDRNOTAVAIL}


def protection_words(error: BaseException) -> str | None:
    """What host protection stopped, as "tried to …: why", when ``error`` is its doing.

    Only for the protections that were applied (:data:`confine.APPLIED`): without
    them the same errors are the machine's own and keep their plain words.
    """
    applied = confine.APPLIED
    for cause in _causes(error):
        if "network" in applied and _network_error(cause):
            return NO_NETWORK
        if ("files" in applied or "scratch" in applied) and _refused_file(cause):
            assert isinstance(cause, OSError)
            return _file_words(os.fsdecode(cause.filename))
    return None


def _helper_words(error: BaseException, path: Path) -> str | None:
    """A module imported from beside the file, which a confined check cannot read."""
    if "files" not in confine.APPLIED or not isinstance(error, ModuleNotFoundError):
        return None
    name = (error.name or "").partition(".")[0]
    beside = path.parent / name
    if not name or not (beside.with_suffix(".py").exists() or beside.is_dir()):
        return None
    return (
        f"imports `{name}` from beside it: a check runs your file on its own, without the "
        "other files of its folder. Put what it needs in the file itself"
    )


def _causes(error: BaseException) -> Iterator[BaseException]:
    """The error and what it wraps: its cause, its context, a URLError's reason."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        reason = getattr(current, "reason", None)
        if isinstance(reason, BaseException):
            yield reason
        current = current.__cause__ or current.__context__


def _network_error(error: BaseException) -> bool:
    if isinstance(error, socket.gaierror):
        return True
    if not isinstance(error, OSError) or getattr(error, "filename", None):
        return False
    if error.errno in _NETWORK_ERRNOS:
        return True
    # Landlock's TCP rules answer EACCES; only a socket call raises it without a file name.
    frames = traceback.extract_tb(error.__traceback__)
    return error.errno == errno.EACCES and any(f.filename.endswith("socket.py") for f in frames)


def _refused_file(error: BaseException) -> bool:
    """A file refused by Landlock (EACCES), by the read-only mounts (EROFS), or hidden
    beneath a folder covered with an empty mount (ENOENT)."""
    if not isinstance(error, OSError) or not error.filename:
        return False
    if error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return True
    name = os.path.abspath(os.fsdecode(error.filename))
    return error.errno == errno.ENOENT and any(
        name.startswith(folder.rstrip(os.sep) + os.sep) for folder in confine.COVERED
    )


def _file_words(name: str) -> str:
    """What was denied, as far as can be told: a file that does not exist was to be
    created, one that may be read was to be written; otherwise it was read, or both."""
    path = os.path.abspath(name)
    if any(path.startswith(folder.rstrip(os.sep) + os.sep) for folder in confine.COVERED):
        return f"tried to open {path}: {READS_CONFINED}"
    if not os.path.lexists(path):
        return f"tried to create {path}: {WRITES_CONFINED}"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return f"tried to open {path}: {READS_CONFINED}, and {WRITES_CONFINED}"
    os.close(fd)
    return f"tried to write {path}: {WRITES_CONFINED}"
