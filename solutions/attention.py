"""Reference solution for the `attention` exercise.

S = q @ k^T / sqrt(d) (future keys set to -inf when causal), P = softmax(S)
along the key axis, out = P @ v. Backward goes through the three steps in
reverse: the two matrix products as in a linear layer, and the softmax with
its full Jacobian per row, contracted with the upstream gradient without
building it: dS = P * (dP - sum_u P * dP). Masked scores have P = 0, so their
gradient is 0 with no extra mask.
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
        # The probabilities carry the mask and the scale; saving them spares
        # backward a second softmax (and a second chance to forget the mask).
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
