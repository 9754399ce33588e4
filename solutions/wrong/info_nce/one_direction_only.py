"""Wrong: only the a->b cross-entropy is differentiated; the b->a term is dropped."""

import torch


class MyInfoNCE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b, temperature):
        logits = a @ b.T / temperature
        positive = logits.diagonal()
        loss_ab = (torch.logsumexp(logits, dim=1) - positive).mean()
        loss_ba = (torch.logsumexp(logits, dim=0) - positive).mean()
        ctx.save_for_backward(a, b, logits)
        ctx.temperature = temperature
        return (loss_ab + loss_ba) / 2

    @staticmethod
    def backward(ctx, grad_output):
        a, b, logits = ctx.saved_tensors
        n = logits.shape[0]
        eye = torch.eye(n, dtype=logits.dtype, device=logits.device)
        rows = torch.softmax(logits, dim=1)
        grad_logits = (rows - eye) * (grad_output / (2 * n))
        scaled = grad_logits / ctx.temperature
        return scaled @ b, scaled.T @ a, None
