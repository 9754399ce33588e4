"""Wrong for the follow-up `long_sequences`: right gradients, but forward keeps the
(T, T) probabilities of every head for backward.

They carry the mask and the scale, and backward needs no second softmax; but
at T positions and H heads they are H·T² numbers per sequence, which outgrow
q, k and v (H·T·d each) as soon as T is larger than d. One number per query,
the row's log-sum-exp, is enough to rebuild them in backward.
"""

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
        # torch.softmax subtracts each row's maximum first: no overflow for large
        # scores, and a row always keeps at least its diagonal unmasked.
        probs = torch.softmax(scores, dim=-1)
        # Wrong for the follow-up: (T, T) per head, kept until backward.
        ctx.save_for_backward(q, k, v, probs)
        ctx.scale = scale
        return probs @ v

    @staticmethod
    def backward(ctx, grad_output):
        q, k, v, probs = ctx.saved_tensors
        scale = ctx.scale
        # out = P @ v: as for a linear layer, over the last two axes.
        grad_v = probs.transpose(-2, -1) @ grad_output
        grad_probs = grad_output @ v.transpose(-2, -1)
        # Softmax along the last axis: dS = P * (dP - sum_u P_u dP_u), row by row.
        row_dot = (grad_probs * probs).sum(dim=-1, keepdim=True)
        grad_scores = probs * (grad_probs - row_dot)
        # S = q @ k^T * scale: the scale multiplies both gradients.
        grad_q = (grad_scores @ k) * scale
        grad_k = (grad_scores.transpose(-2, -1) @ q) * scale
        # causal is a Python bool: no gradient.
        return grad_q, grad_k, grad_v, None
