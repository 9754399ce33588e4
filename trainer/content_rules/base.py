"""What every content rule returns, and what it compares an exercise with."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ContentWarning:
    """One broken rule: which rule, where in the spec (a field path), and what to do."""

    rule: str
    where: str
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


@dataclass(frozen=True)
class OtherQuestion:
    """A question of another exercise or of a shared quiz, for the repeat rules."""

    owner: str  # an exercise id, or the name of a shared quiz
    where: str  # its field path there, e.g. "quiz[2]"
    text: str
    answer: str = ""  # the text of its right choice, when known
