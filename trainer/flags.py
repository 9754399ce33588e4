"""What a grader must look at in a submission, found without running it.

* ``symlink``: the submission is a symbolic link (``matched``: where it points);
* ``outside``: its real path is outside the class folder (``matched``: that path);
* ``reference``: it is the reference solution, whitespace and comments aside;
* ``duplicate``: it is another submission, whitespace and comments aside
  (``matched``: the others).

A symlink or a file outside the folder is never run and scores 0: what it points
at is not the student's work, and may be anything on the grading machine. The
flags name what matched, never the reference's text.
"""

from __future__ import annotations

import io
import os
import tokenize
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

_WORDS = {
    "symlink": "a symlink to {matched}: not run, 0 points",
    "outside": "outside the class folder (it is {matched}): not run, 0 points",
    "reference": "identical to the reference solution (whitespace and comments aside)",
    "duplicate": "identical to {matched} (whitespace and comments aside)",
}


@dataclass(frozen=True)
class Flag:
    kind: str  # symlink, outside, reference or duplicate
    matched: str = ""  # what it matched: the link's target, the real path, the other files

    def words(self) -> str:
        return _WORDS[self.kind].format(matched=self.matched)


def placement_flags(path: Path, folder: Path) -> list[Flag]:
    """``symlink`` when ``path`` is a link; else ``outside`` when its real path is not in
    ``folder`` (a folder on its way is a link out)."""
    if path.is_symlink():
        return [Flag("symlink", os.readlink(path))]
    real = path.resolve()
    if not real.is_relative_to(folder.resolve()):
        return [Flag("outside", str(real))]
    return []


def not_run(flags: Iterable[Flag]) -> str:
    """Why a submission with these flags is not run (empty: it is run)."""
    for flag in flags:
        if flag.kind == "symlink":
            return "not run: a symlink scores 0 (see its flag)"
        if flag.kind == "outside":
            return "not run: a file outside the class folder scores 0 (see its flag)"
    return ""


_DROPPED = {tokenize.COMMENT, tokenize.NL, tokenize.ENCODING, tokenize.ENDMARKER}
_MARKS = {tokenize.INDENT: "<indent>", tokenize.DEDENT: "<dedent>", tokenize.NEWLINE: "<newline>"}


def normalised(source: str) -> str:
    """The code's tokens, without comments, blank lines or spacing (the structure kept);
    the text with its whitespace collapsed when it does not tokenize."""
    try:
        tokens = [
            _MARKS.get(token.type, token.string)
            for token in tokenize.generate_tokens(io.StringIO(source).readline)
            if token.type not in _DROPPED
        ]
    except (tokenize.TokenError, SyntaxError):  # an IndentationError is a SyntaxError
        return " ".join(source.split())
    return " ".join(tokens)


def copy_flags(
    texts: Mapping[int, str],
    names: Sequence[str],
    reference: str | None,
    untouched: Iterable[str] = (),
) -> dict[int, list[Flag]]:
    """``reference`` and ``duplicate`` flags of the submissions' ``texts`` (by place in the
    class; ``names`` names each place). Copies of the ``untouched`` stub are not flagged as
    duplicates: an unstarted exercise is no copy."""
    stubs = {normalised(text) for text in untouched}
    same_code: dict[str, list[int]] = {}
    for index, text in texts.items():
        same_code.setdefault(normalised(text), []).append(index)
    answer = normalised(reference) if reference is not None else None
    flags: dict[int, list[Flag]] = {}
    for code, places in same_code.items():
        for index in places:
            found = []
            if code == answer:
                found.append(Flag("reference"))
            if len(places) > 1 and code not in stubs:
                others = ", ".join(names[other] for other in places if other != index)
                found.append(Flag("duplicate", others))
            if found:
                flags[index] = found
    return flags
