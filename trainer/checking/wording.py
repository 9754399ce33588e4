"""Words both sides of the process boundary use (no torch)."""

from __future__ import annotations


def foreign_graph(class_name: str) -> str:
    """Why an output whose graph node is not the one autograd made for the learner's
    class (another Function's, or one changed by the learner's code) is refused."""
    return (
        f"the output was not produced by `{class_name}.apply`, or its graph node was "
        "changed: its gradient would not come from your backward"
    )


def describe_exception(error: BaseException) -> str:
    """``Name: first line of the message``, or the name alone."""
    text = str(error).strip()
    first = text.splitlines()[0] if text else ""
    name = type(error).__name__
    return f"{name}: {first}" if first else name


# Starts a line the checker writes into the output stream before each stage,
# followed by the job's mark (which the learner's process never holds) and the stage.
OUTPUT_MARK = "\x1etrainer-stage "


def changed_words(changed: list[str]) -> str:
    """What the learner reads when backward changed forward's inputs or outputs (named)."""
    return (
        f"backward changed {', '.join(changed)} in place: forward's inputs and outputs "
        "belong to the caller (a weight the optimizer steps, an activation the next layer "
        "reads). An in-place op on a saved tensor, or through `.data`, writes into the "
        "caller's: compute the gradient into new tensors"
    )
