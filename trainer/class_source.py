"""A class's source, for ``check(exercise, MyClass)``: the checker gets source, never objects.

The source comes from the class's file, else from the cell its methods were
compiled from (IPython and ``%%trainer check --define`` keep cells in
:mod:`linecache`). Only the class and its module's imports are taken.
"""

from __future__ import annotations

import ast
import inspect
import linecache
import textwrap
import types
from pathlib import Path

from trainer.errors import TrainerError

NO_CLASS_SOURCE = (
    "the source of `{name}` cannot be found (Python keeps none for a class typed at a "
    "prompt or made by exec, and this notebook kept no copy of its cell). Check the cell "
    "itself: put `%%trainer check {exercise}` on its first line (after `%load_ext trainer`), or save "
    "the class to a file and pass its path: check({exercise!r}, 'my_{exercise}.py')."
)


def source_of_class(cls: type, exercise_id: str) -> tuple[str, str]:
    """A file name and the source to check for ``cls``: its module's imports, then the class.

    The class keeps its line numbers when it can, so that a traceback points at the
    learner's line. Helpers defined beside the class are not included: pass a path.
    """
    found = _class_in_file(cls) or _class_in_cell(cls)
    if found is None:
        raise TrainerError(NO_CLASS_SOURCE.format(name=cls.__name__, exercise=exercise_id))
    file, body, first, module = found
    imports = _module_imports(module)
    if "import torch" not in imports:
        imports.append("import torch")
    padding = "\n" * max(first - 2, 0)
    name = Path(file).name if Path(file).suffix == ".py" else f"{exercise_id}.py"
    return name, f"{'; '.join(imports)}\n{padding}{textwrap.dedent(body)}"


_Found = tuple[str, str, int, str]  # file, the class's source, its first line, the file's source


def _class_in_file(cls: type) -> _Found | None:
    try:
        lines, first = inspect.getsourcelines(cls)
        file = inspect.getsourcefile(cls)
    except (OSError, TypeError):
        return None
    if file is None:
        return None
    return file, "".join(lines), first, "".join(linecache.getlines(file))


def _class_in_cell(cls: type) -> _Found | None:
    """Where a method of ``cls`` was compiled from, the class statement around it."""
    for member in vars(cls).values():
        code = getattr(getattr(member, "__func__", member), "__code__", None)
        if not isinstance(code, types.CodeType):
            continue
        text = "".join(linecache.getlines(code.co_filename))
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.ClassDef)
                and node.name == cls.__name__
                and node.end_lineno is not None
                and node.lineno <= code.co_firstlineno <= node.end_lineno
            ):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                lines = text.splitlines(keepends=True)[first - 1 : node.end_lineno]
                return code.co_filename, "".join(lines), first, text
    return None


def _module_imports(text: str) -> list[str]:
    """The top-level imports of a module's source, ``__future__`` first; none of the trainer's."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    future, others = [], []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level == 0:
            if node.module == "__future__":
                future.append(ast.unparse(node))
            elif node.module and node.module.split(".")[0] != "trainer":
                others.append(ast.unparse(node))
        elif isinstance(node, ast.Import):
            kept = [a for a in node.names if a.name.split(".")[0] != "trainer"]
            if kept:
                others.append(ast.unparse(ast.Import(names=kept)))
    return future + others
