"""Expected failures and the exit codes they map to.

A learner's wrong code is a *verdict* (exit 1), never an exception here. These
types are for problems a user can fix: an unknown exercise, a missing file, a
broken spec. The CLI catches ``TrainerError`` once and prints its message
without a traceback. A bug of ours is neither (:mod:`trainer.bugs`, exit 3).
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    CHECKS_FAILED = 1
    USAGE = 2
    CHECKER_BUG = 3  # a bug of ours (trainer.bugs): never the learner's mistake
    INTERRUPTED = 130

    @classmethod
    def of_verdict(cls, passed: bool) -> ExitCode:
        """A verdict's exit status: 0 when everything passed, 1 when anything failed."""
        return cls.OK if passed else cls.CHECKS_FAILED


# What to do about a broken spec: said after its file and field.
SPEC_ADVICE = "Fix that field of the spec; docs/spec-format.md describes every field."


class TrainerError(Exception):
    """A problem the user can fix; the message ends with what to do next."""

    exit_code: ExitCode = ExitCode.USAGE

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class SpecError(TrainerError):
    """An exercise spec is malformed. The message names the file and the field."""


class SpecFieldError(SpecError):
    """A field of a spec file is wrong: ``<file>: <field>: <problem>``."""


class SpecProblems(SpecFieldError):
    """Several fields of one spec are wrong: every problem, each once, one per line."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(dict.fromkeys(problems))
        super().__init__("\n".join(self.problems))


class UnknownExerciseError(TrainerError):
    """No exercise has the requested id."""


class WorkspaceError(TrainerError):
    """The workspace or a scratch file cannot be used."""
