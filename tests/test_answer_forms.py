"""Answer forms and the declared protocol (issue 26 §1, §2; issue 30's custom_op).

The learner's process reaches the answer only through its adapter
(``learner/answers.py``), and talks to the checker only in the messages of
``checking/protocol.py``. A custom op answer gets every stage a Function class gets
but the Function API's, plus torch's ``opcheck``; its code is watched as a class's is.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from tests.conftest import CATALOG, REPO, check_json, first_failure, stage
from trainer.checking import protocol
from trainer.checking.transport import WireError
from trainer.errors import SpecError
from trainer.spec import exercise_from_mapping
from trainer.vocabulary import stages_for

SOLUTION = REPO / "solutions" / "custom_op.py"
WRONG = REPO / "solutions" / "wrong" / "custom_op"


def test_a_custom_op_answer_passes_every_stage_its_form_gets_with_full_protection():
    exit_code, report = check_json("custom_op", SOLUTION)

    assert exit_code == 0, first_failure(report)
    ids = [s["id"] for s in report["stages"]]
    assert "opcheck" in ids and "mark_dirty" not in ids and "jvp" not in ids
    assert stage(report, "load")["message"].endswith("a custom op with its gradient registered")
    assert report["protection"]["level"] == "full"


def test_a_custom_op_without_a_registered_gradient_fails_at_load_with_the_line_to_add(tmp_path):
    source = SOLUTION.read_text().replace(
        "scaled_softplus.register_autograd(backward, setup_context=setup_context)\n", ""
    )
    path = tmp_path / "custom_op.py"
    path.write_text(source)
    exit_code, report = check_json("custom_op", path)

    failure = first_failure(report)
    assert exit_code == 1 and failure is not None and failure["id"] == "load"
    assert (
        "scaled_softplus.register_autograd(backward, setup_context=setup_context)"
        in (failure["message"])
    )


def test_a_custom_op_whose_backward_asks_autograd_is_seen_by_the_derivation_watch():
    """The watch wraps the op's registered backward where torch looks it up. Take
    ``adopt_custom_op``'s install of the op's functions away and this passes by_hand."""
    exit_code, report = check_json("custom_op", WRONG / "autograd_inside.py")

    assert exit_code == 1
    assert stage(report, "by_hand")["verdict"] == "fail", stage(report, "by_hand")


def test_a_custom_op_keeping_state_fails_as_state_and_its_fresh_copy_still_imports():
    """The fresh copy of the file registers its op under a name of its own: without
    ``answers.fresh_copy`` torch refuses the second registration and the state stage
    reports that instead of the state."""
    exit_code, report = check_json("custom_op", WRONG / "beta_in_a_global.py")

    state = stage(report, "state")
    assert exit_code == 1 and state["verdict"] == "fail"
    assert "registered" not in state["message"], state["message"]
    assert "not on the class or in a global" in state["message"], state["message"]


def test_the_function_apis_stages_are_not_for_a_custom_op():
    data = {**CATALOG.get("custom_op").data, "function_api": ["jvp"]}
    with pytest.raises(SpecError, match="function_api: the Function API's parts teach"):
        exercise_from_mapping(data, "custom_op.yaml", Path("custom_op.yaml"))
    ids = [s.id for s in stages_for(CATALOG.get("custom_op"))]
    assert "opcheck" in ids
    assert "opcheck" not in [s.id for s in stages_for(CATALOG.get("softplus"))]


# -- the protocol --------------------------------------------------------------------------


def _sample(kind: type[protocol.Message]) -> protocol.Message:
    values = {}
    for item in dataclasses.fields(kind):
        if item.metadata.get("value"):
            values[item.name] = [torch.arange(3.0), None, 2.5]
    return kind(**values)


@pytest.mark.parametrize("kind", [protocol.REQUESTS[op] for op in sorted(protocol.REQUESTS)])
def test_every_request_and_its_reply_survive_the_codec(kind):
    request = _sample(kind)
    header, blobs = request.encode()
    back = protocol.decode_request(header, blobs)
    assert type(back) is kind
    reply = _sample(kind.reply)
    assert repr(kind.reply.decode(*reply.encode())) == repr(reply)


def test_a_reply_with_a_missing_an_unknown_or_a_mistyped_field_is_refused():
    """A frame that is not the reply (a forged result frame, say) is not read with
    defaults. Let ``Message.decode`` skip its field check and this fails."""
    header, blobs = protocol.BackwardReply(result=[torch.ones(2)], modified=[0]).encode()
    with pytest.raises(WireError, match="missing or unknown"):
        protocol.BackwardReply.decode({"type": "done", "token": "x"}, [])
    with pytest.raises(WireError, match="missing or unknown"):
        protocol.BackwardReply.decode({k: v for k, v in header.items() if k != "modified"}, blobs)
    with pytest.raises(WireError, match="modified"):
        protocol.BackwardReply.decode({**header, "modified": ["0"]}, blobs)
    with pytest.raises(WireError, match="unknown request"):
        protocol.decode_request({"op": "os.system"}, [])


def _custom_op_file(tmp_path: Path, backward: str, extra: str = "") -> Path:
    source = SOLUTION.read_text()
    start = source.index("def backward(ctx, grad):")
    end = source.index("scaled_softplus.register_autograd")
    path = tmp_path / "custom_op.py"
    path.write_text(extra + source[:start] + backward + "\n\n" + source[end:])
    return path


def test_a_custom_op_backward_calling_a_torch_kernel_is_seen_by_the_watch(tmp_path):
    """No engine pass runs here (the counted stretch sees none): only the watch inside
    the op's registered backward sees torch's softplus_backward kernel. Take
    ``adopt_custom_op``'s hold on the op's functions away and this passes by_hand."""
    path = _custom_op_file(
        tmp_path,
        "def backward(ctx, grad):\n"
        "    (x,) = ctx.saved_tensors\n"
        "    return torch.ops.aten.softplus_backward(grad, x, ctx.beta, 20.0), None\n",
    )
    exit_code, report = check_json("custom_op", path)

    assert exit_code == 1
    by_hand = stage(report, "by_hand")
    assert by_hand["verdict"] == "fail" and "softplus_backward" in by_hand["message"], by_hand


def test_a_fresh_copy_of_a_custom_op_file_leaves_the_first_copys_op_alone():
    """The state stage imports the learner's file a second time (a fresh copy, without the
    state of earlier calls). torch keeps one registration per op name: a second one
    replaces the first op's gradient with the copy's, and the answer under check would
    run the copy's code from then on. ``answers.fresh_copy`` gives the copy's ops names
    of their own; make it a no-op and the first op's gradient here becomes the copy's."""
    from trainer.checking.learner.answers import fresh_copy
    from trainer.checking.learner.loading import Expected

    source = SOLUTION.read_text().replace("trainer::scaled_softplus", "trainer::fresh_copy_test")
    first: dict[str, object] = {}
    exec(compile(source, "custom_op.py", "exec"), first)
    doubled = source.replace("return grad * torch.sigmoid", "return 2 * grad * torch.sigmoid")
    again: dict[str, object] = {}
    with fresh_copy(Expected("scaled_softplus", ("x", "beta"), 1, "custom_op")):
        exec(compile(doubled, "custom_op.py", "exec"), again)
    x = torch.randn(5, dtype=torch.float64, requires_grad=True)
    for module, factor in ((first, 1.0), (again, 2.0)):
        (grad,) = torch.autograd.grad(module["scaled_softplus"](x, 2.0).sum(), x)  # type: ignore[operator]
        assert torch.allclose(grad, factor * torch.sigmoid(2.0 * x)), factor
