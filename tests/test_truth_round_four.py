"""Verdict truth, round four: what probing the checker with odd right answers and subtle
wrong ones found. Each file is one a learner writes, in our own words."""

from __future__ import annotations

from tests.test_truth import check, first_failure, passes, service

__all__ = ["service"]  # the fixture, shared with test_truth


def test_an_autocast_answer_truer_than_torchs_float32_passes_under_autocast(service, tmp_path):
    """Decorated as asked, computing in float64 inside: under autocast its gradient is
    closer to the truth than torch's own float32 one. The autocast stage compared it
    without the slack backward parity gives (twice torch's float32 error) and called it
    low precision. Drop the slack in ``autocast_stage`` and this file fails."""
    source = """
        import torch
        from torch.amp import custom_bwd, custom_fwd


        class ScoreLogSumExp(torch.autograd.Function):
            @staticmethod
            @custom_fwd(device_type="cpu", cast_inputs=torch.float32)
            def forward(ctx, x, w):
                scores = x.double() @ w.double()
                lse = torch.logsumexp(scores, -1)
                ctx.save_for_backward(x, w, torch.exp(scores - lse[:, None]))
                return lse.to(x.dtype)

            @staticmethod
            @custom_bwd(device_type="cpu")
            def backward(ctx, grad_output):
                x, w, p = ctx.saved_tensors
                g = p * grad_output.double()[:, None]
                return (g @ w.double().T).to(x.dtype), (x.double().T @ g).to(w.dtype)
    """
    passes(check(service, tmp_path, "autocast_logsumexp", source))


def test_an_autocast_backward_left_in_low_precision_still_fails(service, tmp_path):
    """The slack is torch's float32 error, not bfloat16's: a backward run in bfloat16 is
    still named."""
    source = """
        import torch
        from torch.amp import custom_fwd


        class ScoreLogSumExp(torch.autograd.Function):
            @staticmethod
            @custom_fwd(device_type="cpu", cast_inputs=torch.float32)
            def forward(ctx, x, w):
                scores = x @ w
                lse = torch.logsumexp(scores, -1)
                ctx.save_for_backward(x, w, torch.exp(scores - lse[:, None]))
                return lse

            @staticmethod
            def backward(ctx, grad_output):
                x, w, p = ctx.saved_tensors
                g = p * grad_output[:, None]
                return (g @ w.T).to(x.dtype), (x.T @ g).to(w.dtype)
    """
    stage, message, _ = first_failure(check(service, tmp_path, "autocast_logsumexp", source))
    assert stage == "autocast", message
