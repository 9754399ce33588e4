"""No reading of error text (issue 26 §4).

What backward returns is held to what autograd accepts before autograd sees it
(:mod:`trainer.checking.trusted.returned`), a learner's fault carries its
mistake as an id, and a failure said by an earlier stage is marked as such: no
module of the engine reads torch's words, or its own, back. The learner's
process tells a wrong jvp return and an op vmap cannot batch from the values
and from running the Function without vmap, not from torch's message.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

from tests.conftest import REPO, check_json, first_failure, stage
from trainer.checking.trusted.returned import Input, refusal
from trainer.checking.values import Opaque

NAMES = ("x", "weight", "dim")
# forward(ctx, x, weight, dim): two tensors requiring grad, then a Python int.
INPUTS = [Input((4, 3), False), Input((2, 3), False), None]
NEEDS = (True, True, False)
G_X, G_W = torch.ones(4, 3), torch.ones(2, 3)


@pytest.mark.parametrize(
    ("returned", "mistake", "words", "input_name"),
    [
        ([G_X, G_W, None], "not_a_tensor", "backward returned a list of 3 values", ""),
        ((G_X, 0.5, None), "not_a_tensor", "backward returned a float for `weight`", "weight"),
        (
            (G_X, Opaque("torch.Tensor of layout torch.sparse_coo"), None),
            "not_a_tensor",
            "backward returned a torch.Tensor of layout torch.sparse_coo for `weight`; the "
            "gradient is asked as the reference's autograd gives it, a plain tensor (dense, "
            "strided, of the input's dtype) on the input's device: return that "
            "(`.to_dense()` makes a sparse one dense)",
            "weight",
        ),
        (
            (G_X, G_W),
            "wrong_count",
            "backward returned 2 values but forward is called with 3 inputs "
            "(`x`, `weight`, `dim`): return one per input, in order, None for non-tensors",
            "",
        ),
        ((G_X, G_W, None, G_X), "wrong_count", "backward returned 4 values", ""),
        (
            (G_X, G_W, G_X),
            "grad_for_non_tensor",
            "backward returned a gradient for `dim`, which is not a tensor: return None for it",
            "dim",
        ),
        (
            (G_X.T, G_W, None),
            "transposed",
            "grad for `x` has shape (3, 4) but `x` has shape (4, 3): it is transposed",
            "x",
        ),
        (
            (torch.ones(12), G_W, None),
            "wrong_shape",
            "grad for `x` has shape (12,) but `x` has shape (4, 3): a gradient has the shape",
            "x",
        ),
        (
            (G_X, G_W.to(torch.complex64), None),
            "wrong_dtype",
            "grad for `weight` is complex (torch.complex64) but `weight` is real",
            "weight",
        ),
    ],
    ids=[
        "a list",
        "a float",
        "a sparse tensor",
        "too few",
        "a tensor past the inputs",
        "a gradient for an int",
        "transposed",
        "flattened",
        "complex",
    ],
)
def test_what_autograd_refuses_is_named_from_the_values_with_its_mistake(
    returned: object, mistake: str, words: str, input_name: str
):
    found = refusal(returned, INPUTS, NEEDS, NAMES)
    assert found is not None
    assert (found.mistake, found.input) == (mistake, input_name)
    assert words in found.words, found.words


@pytest.mark.parametrize(
    "returned",
    [
        (G_X, G_W, None),
        (G_X, G_W, None, None, None),  # trailing Nones: autograd drops them
        (torch.ones(5, 4, 3), torch.ones(1, 2, 3), None),  # broadcastable: autograd sums them
        (G_X.double(), G_W.half(), None),  # another real dtype: autograd casts it
        (G_X, None, None),  # None for an input that requires grad: compared later
    ],
    ids=["exact", "trailing Nones", "broadcastable", "another real dtype", "None"],
)
def test_what_autograd_accepts_is_left_to_it(returned: object):
    assert refusal(returned, INPUTS, NEEDS, NAMES) is None


def test_a_gradient_for_an_input_that_needs_none_is_not_held_to_its_shape():
    """autograd drops it unread; the contract stage says None is the honest value."""
    assert refusal((G_X, torch.ones(9), None), INPUTS, (True, False, False), NAMES) is None


def test_no_module_of_the_checking_engine_uses_regular_expressions():
    """Nothing in the engine reads an error's words back (torch's or its own)."""
    users = [
        path.relative_to(REPO)
        for path in sorted((REPO / "trainer" / "checking").rglob("*.py"))
        if "\nimport re\n" in path.read_text() or "\nfrom re " in path.read_text()
    ]
    assert users == []


def test_a_repeated_failure_is_held_back_by_its_mark_not_by_its_words():
    from trainer import console
    from trainer.checking.report import CheckReport, StageResult, Verdict

    stages = [
        StageResult("backward", Verdict.FAIL, "grad for `x` is wrong"),
        StageResult(
            "contract", Verdict.FAIL, "same error as Backward parity above", same_as="backward"
        ),
        StageResult("gradcheck", Verdict.FAIL, "same error as a stage, in words only"),
    ]
    report = CheckReport("sigmoid", "sigmoid.py", "0" * 64, 0, stages)
    with console.captured(100) as shown:
        console._failures(report)
    text = shown.getvalue()
    assert "✘ Backward parity" in text
    assert "✘ Backward contract" not in text
    assert "✘ gradcheck" in text  # words alone mark nothing


def test_not_written_is_one_failure_for_every_run_by_its_id_not_its_words():
    from trainer.checking.trusted.diagnosis import named
    from trainer.checking.trusted.stages import Failure, summarise

    run: Any = type("Run", (), {"label": "x: (7,) in float32"})()
    words = "backward() is not written yet: it still raises NotImplementedError"
    marked = Failure(run, words, diagnosis=named("not_written", words))
    assert summarise([marked, marked], 2, "ok").message == words
    unmarked = Failure(run, words)
    assert summarise([unmarked, unmarked], 2, "ok").message == f"{words} (for x: (7,) in float32)"


# -- the learner's side: jvp and vmap, told from values and behaviour ---------------------


def _module(path: Path) -> ModuleType:
    """The file run as a module of its own, in this process (no bytecode left beside it)."""
    module = ModuleType(path.stem)
    exec(compile(path.read_text(), str(path), "exec"), vars(module))
    return module


def _dot_jvp(name: str) -> Any:
    folder = REPO / "solutions" / ("wrong/dot_jvp" if name != "right" else "")
    return _module(folder / f"{'dot_jvp' if name == 'right' else name}.py").ScaledDot


@pytest.mark.parametrize(
    ("variant", "refused"),
    [
        ("right", None),
        ("jvp_like_backward", {"returned": 3, "outputs": 1}),  # one value per input
        ("jvp_forgets_the_sum", {"returned_shape": [4], "output_shape": []}),
        ("jvp_forgets_scale", None),  # a wrong value torch takes: compared by the checker
    ],
)
def test_a_jvp_return_torch_refuses_is_told_from_its_values(variant: str, refused: object):
    from trainer.checking.learner.api_calls import _jvp_refusal

    x, y = torch.randn(4), torch.randn(4)
    for tangents in ([torch.randn(4), torch.randn(4), None], [torch.randn(4), None, None]):
        # On both inputs, and on x alone: then torch hands jvp zeros for y, and so does this.
        assert _jvp_refusal(_dot_jvp(variant), [x, y, 0.5], tangents) == refused


# -- end to end -----------------------------------------------------------------------------

SIGMOID = (REPO / "solutions" / "sigmoid.py").read_text()


def _sigmoid(tmp_path: Path, old: str, new: str) -> Path:
    assert old in SIGMOID
    path = tmp_path / "sigmoid.py"
    path.write_text(SIGMOID.replace(old, new))
    return path


def test_a_complex_gradient_is_named_as_a_wrong_dtype_not_an_error_of_torchs(tmp_path: Path):
    path = _sigmoid(
        tmp_path,
        "return grad_output * output * (1 - output)",
        "return (grad_output * output * (1 - output)) + 0j",
    )
    code, report = check_json("sigmoid", path)
    failed = first_failure(report)
    assert code == 1 and failed is not None and report["bug"] is None
    assert failed["id"] == "backward"
    assert failed["message"].startswith("grad for `x` is complex (torch.complex64) but `x` is real")
    assert failed["diagnosis"]["mistake"] == "wrong_dtype"


def test_a_sparse_gradient_is_named_as_not_a_tensor_it_can_send(tmp_path: Path):
    path = _sigmoid(
        tmp_path,
        "return grad_output * output * (1 - output)",
        "return (grad_output * output * (1 - output)).to_sparse()",
    )
    code, report = check_json("sigmoid", path)
    failed = first_failure(report)
    assert code == 1 and failed is not None and report["bug"] is None
    assert (
        "backward returned a torch.Tensor of layout torch.sparse_coo for `x`" in failed["message"]
    )


def test_gradcheck_names_an_output_of_another_dtype_before_its_arithmetic_trips(tmp_path: Path):
    path = _sigmoid(tmp_path, "return output\n", "return output.half()\n")
    code, report = check_json("sigmoid", path)
    assert code == 1 and report["bug"] is None
    gradcheck = stage(report, "gradcheck")
    assert gradcheck["verdict"] == "fail"
    assert (
        "the output of forward has dtype torch.float16, expected torch.float64"
        in gradcheck["message"]
    )


def test_an_unwritten_backward_is_one_failure_for_every_run_by_its_mistake_id(tmp_path: Path):
    """The learner's process says `not_written` as an id; the checker reads no words: the
    failure is said once, without a run, and is diagnosed as such."""
    import yaml

    spec = yaml.safe_load((REPO / "exercises" / "sigmoid.yaml").read_text(encoding="utf-8"))
    path = tmp_path / "sigmoid.py"
    path.write_text(spec["stub"], encoding="utf-8")
    _, report = check_json("sigmoid", path)
    backward = stage(report, "backward")
    assert backward["message"] == (
        "backward() is not written yet: it still raises NotImplementedError. "
        "Write it in sigmoid.py, then run `trainer check` again."
    )
    assert backward["details"] == []
    assert backward["diagnosis"]["mistake"] == "not_written"
