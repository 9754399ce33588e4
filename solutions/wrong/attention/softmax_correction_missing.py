import math

import torch


class MyAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal):
        scale = 1.0 / math.sqrt(q.shape[-1])
        scores = (q @ k.transpose(-2, -1)) * scale
        if causal:
            n_q, n_k = scores.shape[-2], scores.shape[-1]
            future = torch.ones(n_q, n_k, dtype=torch.bool, device=q.device).triu(1)
            scores = scores.masked_fill(future, float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        ctx.save_for_backward(q, k, v, probs)
        ctx.scale = scale
        return probs @ v

    @staticmethod
    def backward(ctx, grad_output):
        q, k, v, probs = ctx.saved_tensors
        grad_v = probs.transpose(-2, -1) @ grad_output
        grad_probs = grad_output @ v.transpose(-2, -1)
        # softmax = exp(s) / sum: the exp gives probs times the incoming gradient
        grad_scores = probs * grad_probs
        grad_q = grad_scores @ k * ctx.scale
        grad_k = grad_scores.transpose(-2, -1) @ q * ctx.scale
        return grad_q, grad_k, grad_v, None
