"""The first wrong gradient, walking backward through a spec's chain (``intermediates:``).

The learner's backward is a black box that returns its inputs' gradients; the checker
finds where it first goes wrong by looking for the reference's gradient at each layer
among the tensors that backward computes (trusted/intermediates.py, recording.py), for
the atomic route and the collapsed one alike, and says nothing when it cannot tell.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

from tests.conftest import CATALOG, REPO, check_json, first_failure, stage
from trainer.authoring import VariantResult
from trainer.checking import protocol
from trainer.checking.learner.answers import CustomOpAnswer, FunctionAnswer
from trainer.checking.recording import BackwardTensors
from trainer.checking.trusted.intermediates import first_wrong, locate, same
from trainer.checking.trusted.plan import Plan, _with_layer_grads, reference_runs
from trainer.checking.trusted.stages import Checked
from trainer.errors import SpecError
from trainer.spec import Chain, WrongVariant, exercise_from_mapping

EXERCISE = "makemore_mlp"
SOLUTION = REPO / "solutions" / f"{EXERCISE}.py"
WRONG = REPO / "solutions" / "wrong" / EXERCISE


def _chain() -> Chain:
    chain = CATALOG.get(EXERCISE).intermediates
    assert chain is not None
    return chain


CHAIN = _chain()
LAYERS = [layer.name for layer in CHAIN.layers]  # logits, h, hpreact, hprebn, embcat
INPUTS = list(CHAIN.feeds)  # C, W1, b1, bngain, bnbias, W2, b2


def _found(*names: str) -> list[bool]:
    return [name in names for name in LAYERS]


def _right(*wrong: str) -> dict[str, bool]:
    return {name: name not in wrong for name in INPUTS}


# -- the walk, on its own ------------------------------------------------------------------


def test_the_walk_names_the_first_layer_whose_gradient_no_tensor_holds():
    found = _found("logits", "h", "hpreact")
    right = _right("W1", "C")
    assert locate(CHAIN, found, right, truncated=False) == "hprebn"


def test_the_walk_names_an_input_whose_returned_gradient_is_wrong_below_right_layers():
    found = _found(*LAYERS)
    assert locate(CHAIN, found, _right("C"), truncated=False) == "C"
    assert locate(CHAIN, found, _right("bngain", "C"), truncated=False) == "bngain"


def test_a_layer_not_found_above_a_found_one_was_right_inside_an_expression_and_the_walk_goes_on():
    """A collapsed backward that scales before it multiplies (`n * dh * (1 - h**2)`)
    never holds the gradient at hpreact itself; the batch-norm input below is right."""
    found = _found("logits", "h", "hprebn", "embcat")
    assert locate(CHAIN, found, _right("bngain"), truncated=False) == "bngain"
    assert locate(CHAIN, found, _right(), truncated=False) is None


def test_nothing_is_said_of_a_layer_whose_size_backward_never_computed():
    """A gradient worked out in forward and only scaled by backward passes through no
    tensor of backward but its results: the layer cannot be judged."""
    found, right = _found(), _right("W2", "C")
    assert locate(CHAIN, found, right, truncated=False) == "logits"
    candidates = [name != "logits" for name in LAYERS]
    assert locate(CHAIN, found, right, truncated=False, candidates=candidates) is None


def test_nothing_is_said_when_the_reply_left_tensors_out():
    found = _found("logits", "h", "hpreact")
    assert locate(CHAIN, found, _right("W1", "C"), truncated=True) is None


def test_nothing_is_said_of_a_layer_whose_inputs_fed_by_it_are_all_right():
    """hpreact's gradient gives bngain's and bnbias's: both right means the gradient at
    hpreact was right in effect, only never held as one tensor."""
    found = _found("logits", "h")
    assert locate(CHAIN, found, _right("W1", "b1", "C"), truncated=False) is None


def test_nothing_is_said_of_a_layer_when_no_input_below_it_is_wrong():
    """h gives no input its gradient; with every input right, a gradient at h that no
    tensor holds is one computed inside a larger expression."""
    assert locate(CHAIN, _found("logits"), _right(), truncated=False) is None


def test_nothing_is_said_when_every_gradient_is_right():
    assert locate(CHAIN, _found(*LAYERS), _right(), truncated=False) is None


def test_validation_holds_a_wrong_variant_to_the_place_it_declares():
    declared = WrongVariant("v.py", "backward", "why", mistake=None, first_wrong="hprebn")
    assert VariantResult(declared, "backward", None, None, "hprebn").ok
    elsewhere = VariantResult(declared, "backward", None, None, "logits")
    assert not elsewhere.ok
    assert elsewhere.describe() == (
        "v.py: expected backward, first wrong at hprebn, got backward, first wrong at logits"
    )
    assert "first wrong at nowhere said" in VariantResult(declared, "backward", None).describe()


def test_a_layer_s_gradient_is_found_in_another_layout_but_a_square_one_s_transpose_is_not():
    want = torch.arange(6.0, dtype=torch.float64).reshape(2, 3) - 2.5
    assert same(want.clone(), want) and same(want.float(), want)
    assert same(want.reshape(2, 3, 1), want)  # (N, T, d) for (N, T·d)
    assert same(want.T.contiguous(), want)  # worked with as (V, N)
    square = torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.float64)
    assert not same(square.T, square)  # the transpose mistake itself
    assert not same(want * (1 + 1e-4), want)
    assert same(want * (1 + 1e-9), want)


# -- what the learner's process records ----------------------------------------------------


def test_a_gradient_written_row_by_row_into_a_buffer_is_recorded_as_the_whole_buffer():
    """Each `g[i] = ...` is a copy into a row, a view: the recorder copies the tensor the
    row is a view of. Take its `_base` branch out and the whole g is never recorded."""
    recorder = BackwardTensors({12}, most=100, most_bytes=1 << 20)
    with recorder:
        g = torch.zeros(3, 4)
        for i in range(3):
            g[i] = torch.full((4,), float(i + 1))
    wanted = torch.arange(1.0, 4.0).repeat_interleave(4).reshape(3, 4)
    assert any(torch.equal(t, wanted) for t in recorder.kept)


def test_the_recorder_keeps_only_the_sizes_asked_and_says_when_it_left_some_out():
    recorder = BackwardTensors({6}, most=2, most_bytes=1 << 20)
    with recorder:
        x = torch.ones(2, 3)
        y = x * 2
        z = y + 1
        torch.ones(5) * 3  # another size: not kept
    assert len(recorder.kept) == 2 and recorder.truncated
    assert all(t.numel() == 6 for t in recorder.kept)
    assert not any(t.data_ptr() in (y.data_ptr(), z.data_ptr()) for t in recorder.kept)


def test_the_copies_of_backward_s_results_are_told_from_the_values_it_computed_on_its_way():
    recorder = BackwardTensors({4}, most=100, most_bytes=1 << 20)
    with recorder:
        on_the_way = torch.ones(4) * 2
        result = on_the_way + 1
        flat = torch.zeros(4)
        flat.add_(result)
    assert recorder.made_into([flat.view(2, 2), None]) == [False, False, False, True, True]


# -- in the checker, against a learner side in this process --------------------------------


def _module(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


class _LearnerSide:
    """The learner process's side of a request, in this process: its answer only."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer

    def failed(self, error: BaseException, during: str) -> protocol.LearnerError:
        return protocol.LearnerError(f"{during}: {error}")


class _Sandbox:
    """What the checker sends goes through the codec to a handler in this process; every
    request is kept as sent, header and tensor bytes."""

    def __init__(self, answer: Any) -> None:
        self.learner = _LearnerSide(answer)
        self.sent: list[tuple[dict[str, Any], list[bytes]]] = []

    def call(self, request: protocol.Request[Any]) -> Any:
        header, blobs = request.encode()
        self.sent.append((header, blobs))
        reply = protocol.decode_request(header, blobs).handle(self.learner)  # type: ignore[arg-type]
        return type(reply).decode(*reply.encode())


def _checked(variant: Path) -> tuple[Checked, _Sandbox]:
    exercise = CATALOG.get(EXERCISE)
    torch.set_num_threads(1)
    runs = tuple(_with_layer_grads(exercise, run) for run in reference_runs(exercise, 0))
    function_class = _module(variant, f"learner_{variant.stem}").MakemoreMLP
    sandbox = _Sandbox(FunctionAnswer(function_class))
    checked = Checked(
        function_class=function_class,
        plan=Plan(runs=runs),
        exercise=exercise,
        path=variant,
        sandbox=sandbox,  # type: ignore[arg-type]
    )
    return checked, sandbox


def test_the_learner_process_gets_the_call_and_the_layers_shapes_never_a_value_the_checker_expects():
    """The request carries forward's arguments, the upstream gradient and the layers'
    shapes; none of the bytes sent is a reference gradient at a layer, of an input, or
    forward's expected output."""
    assert {f.name for f in dataclasses.fields(protocol.LayerTensors)} == {
        "args",
        "requires_grad",
        "upstream",
        "shapes",
        "most",
        "most_bytes",
    }
    checked, sandbox = _checked(WRONG / "bn_direct_path_only.py")
    run = checked.plan.runs[0]
    found = first_wrong(checked, run)
    assert found is not None and found.at == "hprebn"
    ((header, blobs),) = sandbox.sent
    assert header["op"] == "layer_tensors"
    assert header["shapes"] == [list(g.shape) for g in run.layer_grads]
    secrets = [*run.layer_grads, *run.expected_grads.values(), *run.expected_outputs]
    for secret in secrets:
        for dtype in (torch.float64, torch.float32):
            raw = secret.to(dtype).contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
            assert all(raw not in blob for blob in blobs if blob)


def test_in_the_checker_a_collapsed_backward_is_traced_to_its_first_wrong_layer():
    checked, _ = _checked(WRONG / "bessel_mismatch.py")
    found = first_wrong(checked, checked.plan.runs[0])
    assert found is not None and found.at == "hprebn"
    assert found.details[0].startswith(
        "The first wrong gradient, walking backward, is at the batch-norm input hprebn"
    )


def test_a_custom_op_answer_is_recorded_through_its_own_graph_node():
    """The request calls the answer through its adapter: a custom op's backward, which
    torch's generated node calls, is recorded as a Function's is."""
    op_name = "trainer_tests::recorded_scale"

    @torch.library.custom_op(op_name, mutates_args=())
    def scale(x: torch.Tensor) -> torch.Tensor:
        return x * 3

    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        doubled = grad * 2
        return doubled + grad  # 3 · grad, through a tensor of 2 · grad

    scale.register_autograd(backward, setup_context=lambda ctx, inputs, output: None)
    answer = CustomOpAnswer("scale", scale)
    upstream = torch.arange(4.0, dtype=torch.float64)
    request = protocol.LayerTensors(
        args=[torch.ones(4, dtype=torch.float64)],
        requires_grad=[True],
        upstream=[upstream],
        shapes=[[4]],
    )
    reply = request.handle(_LearnerSide(answer))  # type: ignore[arg-type]
    assert reply.error is None
    kept = protocol.listed(reply.tensors)  # type: ignore[attr-defined]
    assert any(torch.equal(t, 2 * upstream) for t in kept)
    assert any(torch.equal(t, 3 * upstream) for t in kept)


# -- the whole check, through the learner's process ----------------------------------------


def _backward(path: Path) -> dict[str, Any]:
    exit_code, report = check_json(EXERCISE, path)
    assert exit_code == 1
    failure = first_failure(report)
    assert failure is not None and failure["id"] == "backward", failure
    return failure


@pytest.mark.parametrize(
    ("variant", "at", "words"),
    [
        # The atomic route, every intermediate a step of its own.
        ("bn_direct_path_only", "hprebn", "is at the batch-norm input hprebn"),
        ("bn_variance_path_forgotten", "hprebn", "is at the batch-norm input hprebn"),
        # The collapsed route, one formula per layer.
        ("bessel_mismatch", "hprebn", "is at the batch-norm input hprebn"),
        ("logits_not_divided_by_n", "logits", "is at the logits"),
        ("embedding_not_accumulated", "C", "is the one for `C`"),
        ("bngain_grad_from_bndiff", "bngain", "is the one for `bngain`"),
    ],
)
def test_a_wrong_backward_is_told_where_its_first_wrong_gradient_is(
    variant: str, at: str, words: str
):
    failure = _backward(WRONG / f"{variant}.py")
    assert failure["first_wrong"] == at
    assert f"The first wrong gradient, walking backward, {words}" in failure["details"][0]


def test_the_layers_above_the_first_wrong_one_are_named_right():
    failure = _backward(WRONG / "bn_direct_path_only.py")
    assert failure["details"][0].endswith(
        "your backward gets the gradients at the logits, tanh's output h and the "
        "batch-norm output hpreact right."
    )


# The reference's backward from tanh's slope to the batch-norm input, replaced below by
# versions that hold the gradient at hpreact only as n times itself, never as one tensor.
_FROM_TANH = SOLUTION.read_text().split("        dhpreact = (1 - h**2) * dh\n")[1]
_FROM_TANH = (
    "        dhpreact = (1 - h**2) * dh\n" + _FROM_TANH.split("        # hprebn = embcat")[0]
)


def _rewritten(tmp_path: Path, name: str, block: str) -> Path:
    source = SOLUTION.read_text()
    assert _FROM_TANH in source
    path = tmp_path / name
    path.write_text(source.replace(_FROM_TANH, block))
    return path


def test_a_right_gradient_never_held_as_one_tensor_is_walked_past(tmp_path: Path):
    """hpreact's gradient exists only as n times itself; the batch-norm input below it
    is right and found, so the walk goes on to bngain's own mistake (bndiff where
    bnraw belongs)."""
    path = _rewritten(
        tmp_path,
        "scaled_then_bngain.py",
        """        dhpreact_n = n * dh * (1 - h**2)
        dbngain = (bnraw / bnvar_inv * dhpreact_n).sum(0, keepdim=True) / n
        dbnbias = dhpreact_n.sum(0, keepdim=True) / n
        dhprebn = (
            bngain
            * bnvar_inv
            / n
            * (
                dhpreact_n
                - dhpreact_n.sum(0) / n
                - bnraw * (dhpreact_n * bnraw).sum(0) / (n - 1)
            )
        )
""",
    )
    failure = _backward(path)
    assert failure["first_wrong"] == "bngain", failure["details"]


def test_nothing_is_said_where_the_evidence_cannot_tell_a_wrong_layer_from_one_never_held(
    tmp_path: Path,
):
    """hpreact's gradient is never one tensor, and batch norm goes through its direct
    path only right below it: no layer from hpreact down is found, and bngain and
    bnbias, fed by hpreact, are right. The first wrong gradient is at hprebn, but the
    evidence cannot tell that from a wrong hpreact: nothing is said."""
    path = _rewritten(
        tmp_path,
        "scaled_then_direct_path.py",
        """        dhpreact_n = n * dh * (1 - h**2)
        dbngain = (bnraw * dhpreact_n).sum(0, keepdim=True) / n
        dbnbias = dhpreact_n.sum(0, keepdim=True) / n
        dhprebn = bngain * bnvar_inv * dhpreact_n / n
""",
    )
    failure = _backward(path)
    assert failure["first_wrong"] == ""
    assert not any("first wrong gradient" in line for line in failure["details"])


def test_nothing_is_said_of_gradients_worked_out_in_forward_and_scaled_by_backward(
    tmp_path: Path,
):
    """The whole chain runs in forward, for an upstream gradient of 1, and backward
    only multiplies the saved results by grad_output: the gradient at the logits is
    right but never in backward. W2's formula is wrong (it pairs the logits' gradient
    with hpreact, not h); the logits must not be blamed for it."""
    path = tmp_path / "in_forward.py"
    path.write_text(IN_FORWARD)
    failure = _backward(path)
    assert failure["first_wrong"] == "", failure["details"]


def test_the_atomic_route_written_right_passes_every_stage(tmp_path: Path):
    """Karpathy's exercise 1, every intermediate its own step, with his forward's
    `1/n * sum` for the mean."""
    path = tmp_path / "atomic.py"
    path.write_text(ATOMIC_RIGHT)
    exit_code, report = check_json(EXERCISE, path)
    assert exit_code == 0, first_failure(report)


def test_the_recording_leaves_the_derivation_watch_nothing_to_report():
    """The backward the recorder watches runs under the derivation watch too: the check
    of a wrong variant still finds it derived by hand."""
    exit_code, report = check_json(EXERCISE, WRONG / "bn_direct_path_only.py")
    assert exit_code == 1
    assert stage(report, "backward")["first_wrong"] == "hprebn"
    assert stage(report, "by_hand")["verdict"] == "pass", stage(report, "by_hand")


# -- the spec ----------------------------------------------------------------------------


def _with(**changes: Any) -> dict[str, Any]:
    return {**CATALOG.get(EXERCISE).data, **changes}


def _problem(data: dict[str, Any]) -> str:
    with pytest.raises(SpecError) as raised:
        exercise_from_mapping(data, "makemore_mlp.yaml", Path("makemore_mlp.yaml"))
    return raised.value.message


def test_the_chain_must_be_a_chain_each_expression_using_the_next_layer():
    data = CATALOG.get(EXERCISE).data
    layers = [dict(layer) for layer in data["intermediates"]["layers"]]
    layers[1]["value"] = "torch.tanh(hprebn)"  # skips hpreact
    problem = _problem(_with(intermediates={**data["intermediates"], "layers": layers}))
    assert "intermediates.layers[0]" not in problem
    assert "must use the layer 'hpreact' and no other" in problem


def test_the_chain_must_use_every_input_that_requires_grad():
    data = CATALOG.get(EXERCISE).data
    layers = [dict(layer) for layer in data["intermediates"]["layers"]]
    layers[0]["value"] = "h @ W2"
    problem = _problem(_with(intermediates={**data["intermediates"], "layers": layers}))
    assert "the chain never uses 'b2', which requires grad" in problem


def test_a_wrong_variant_names_a_place_of_the_chain_and_fails_at_backward():
    data = CATALOG.get(EXERCISE).data
    variants = [dict(v) for v in data["wrong_variants"]]
    variants[0]["first_wrong"] = "bndiff"
    assert "'bndiff' is not one of: logits, W2, b2, h" in _problem(_with(wrong_variants=variants))
    variants[0]["first_wrong"] = "hprebn"
    variants[0]["fails_at"] = "contract"
    assert "the variant must fail at backward" in _problem(_with(wrong_variants=variants))
    without = {k: v for k, v in _with(wrong_variants=[dict(data["wrong_variants"][0])]).items()}
    del without["intermediates"]
    assert "needs `intermediates:`" in _problem(without)


def test_a_chain_that_is_not_the_reference_stops_the_check_as_the_spec_s_fault():
    from trainer.checking.trusted.plan import build_plan

    data = CATALOG.get(EXERCISE).data
    layers = [dict(layer) for layer in data["intermediates"]["layers"]]
    layers[0]["value"] = "h @ W2 - b2"
    exercise = exercise_from_mapping(
        _with(intermediates={**data["intermediates"], "layers": layers}), "makemore_mlp.yaml"
    )
    torch.set_num_threads(1)
    with pytest.raises(ValueError, match="the chain's output is not the reference's"):
        build_plan(exercise, 0)


ATOMIC_RIGHT = """
import torch
import torch.nn.functional as F


class MakemoreMLP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Xb, C, W1, b1, bngain, bnbias, W2, b2, Yb):
        n = Xb.shape[0]
        emb = C[Xb]
        embcat = emb.reshape(n, -1)
        hprebn = embcat @ W1 + b1
        bnmeani = 1 / n * hprebn.sum(0, keepdim=True)
        bndiff = hprebn - bnmeani
        bndiff2 = bndiff**2
        bnvar = 1 / (n - 1) * bndiff2.sum(0, keepdim=True)
        bnvar_inv = (bnvar + 1e-5) ** -0.5
        bnraw = bndiff * bnvar_inv
        hpreact = bngain * bnraw + bnbias
        h = torch.tanh(hpreact)
        logits = h @ W2 + b2
        logit_maxes = logits.max(1, keepdim=True).values
        norm_logits = logits - logit_maxes
        counts = norm_logits.exp()
        counts_sum = counts.sum(1, keepdim=True)
        logprobs = norm_logits - counts_sum.log()
        loss = -logprobs[range(n), Yb].mean()
        ctx.save_for_backward(
            Xb, C, emb, embcat, W1, bngain, bndiff, bnvar, bnvar_inv, bnraw, h, W2,
            logits, counts, counts_sum, Yb,
        )
        return loss

    @staticmethod
    def backward(ctx, grad_output):
        (
            Xb, C, emb, embcat, W1, bngain, bndiff, bnvar, bnvar_inv, bnraw, h, W2,
            logits, counts, counts_sum, Yb,
        ) = ctx.saved_tensors
        n = Xb.shape[0]
        dlogprobs = torch.zeros_like(counts)
        dlogprobs[range(n), Yb] = -1.0 / n
        dlogprobs = dlogprobs * grad_output
        dnorm_logits = dlogprobs.clone()
        dcounts_sum = -(1.0 / counts_sum) * dlogprobs.sum(1, keepdim=True)
        dcounts = torch.ones_like(counts) * dcounts_sum
        dnorm_logits = dnorm_logits + counts * dcounts
        dlogits = dnorm_logits.clone()
        dlogit_maxes = (-dnorm_logits).sum(1, keepdim=True)
        dlogits = dlogits + F.one_hot(logits.max(1).indices, logits.shape[1]) * dlogit_maxes
        dh = dlogits @ W2.T
        dW2 = h.T @ dlogits
        db2 = dlogits.sum(0)
        dhpreact = (1.0 - h**2) * dh
        dbngain = (bnraw * dhpreact).sum(0, keepdim=True)
        dbnraw = bngain * dhpreact
        dbnbias = dhpreact.sum(0, keepdim=True)
        dbndiff = bnvar_inv * dbnraw
        dbnvar_inv = (bndiff * dbnraw).sum(0, keepdim=True)
        dbnvar = -0.5 * (bnvar + 1e-5) ** -1.5 * dbnvar_inv
        dbndiff2 = 1.0 / (n - 1) * torch.ones_like(bndiff) * dbnvar
        dbndiff = dbndiff + 2 * bndiff * dbndiff2
        dhprebn = dbndiff.clone()
        dbnmeani = (-dbndiff).sum(0, keepdim=True)
        dhprebn = dhprebn + 1.0 / n * torch.ones_like(dbndiff) * dbnmeani
        dembcat = dhprebn @ W1.T
        dW1 = embcat.T @ dhprebn
        db1 = dhprebn.sum(0)
        demb = dembcat.view(emb.shape)
        dC = torch.zeros_like(C)
        for k in range(Xb.shape[0]):
            for j in range(Xb.shape[1]):
                dC[Xb[k, j]] += demb[k, j]
        return None, dC, dW1, db1, dbngain, dbnbias, dW2, db2, None
"""


IN_FORWARD = """
import torch


class MakemoreMLP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Xb, C, W1, b1, bngain, bnbias, W2, b2, Yb):
        n = Xb.shape[0]
        embcat = C[Xb].reshape(n, -1)
        hprebn = embcat @ W1 + b1
        bndiff = hprebn - hprebn.sum(0, keepdim=True) / n
        bnvar_inv = ((bndiff**2).sum(0, keepdim=True) / (n - 1) + 1e-5) ** -0.5
        bnraw = bndiff * bnvar_inv
        hpreact = bngain * bnraw + bnbias
        h = torch.tanh(hpreact)
        logits = h @ W2 + b2
        shifted = logits - logits.amax(1, keepdim=True)
        log_probs = shifted - torch.log(torch.exp(shifted).sum(1, keepdim=True))
        # Every gradient now, for an upstream gradient of 1.
        dlogits = torch.exp(log_probs)
        dlogits[torch.arange(n), Yb] -= 1
        dlogits = dlogits / n
        dW2 = hpreact.T @ dlogits  # wrong: the layer's input is h
        db2 = dlogits.sum(0)
        dhpreact = (1 - h**2) * (dlogits @ W2.T)
        dbngain = (bnraw * dhpreact).sum(0, keepdim=True)
        dbnbias = dhpreact.sum(0, keepdim=True)
        dhprebn = bngain * bnvar_inv / n * (
            n * dhpreact - dhpreact.sum(0) - n / (n - 1) * bnraw * (dhpreact * bnraw).sum(0)
        )
        dW1 = embcat.T @ dhprebn
        db1 = dhprebn.sum(0)
        dC = torch.zeros_like(C).index_add_(
            0, Xb.reshape(-1), (dhprebn @ W1.T).reshape(-1, C.shape[1])
        )
        ctx.save_for_backward(dC, dW1, db1, dbngain, dbnbias, dW2, db2)
        return -log_probs[torch.arange(n), Yb].mean()

    @staticmethod
    def backward(ctx, grad_output):
        grads = [g * grad_output for g in ctx.saved_tensors]
        return None, *grads, None
"""
