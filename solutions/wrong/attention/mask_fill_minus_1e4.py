"""Wrong: backward recomputes the probabilities with the causal mask filled with
-1e4 instead of -inf (a common trick in half-precision code).

Right while every visible score is far above -1e4; but a query whose visible
scores are all far below -1e4 (reachable with inputs inside ±100: q·k/√d can
reach -√d·10⁴) gives its weight to the future keys it must not see.
"""

import math

import torch


def probabilities(q, k, causal):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        n = scores.shape[-1]
        future = torch.triu(torch.ones(n, n, dtype=torch.bool), 1)
        scores = scores.masked_fill(future, -1e4)
    return torch.softmax(scores, dim=-1)


class MyAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal):
        ctx.save_for_backward(q, k, v)
        ctx.causal = causal
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)

    @staticmethod
    def backward(ctx, grad_output):
        q, k, v = ctx.saved_tensors
        p = probabilities(q, k, ctx.causal)
        grad_v = p.transpose(-2, -1) @ grad_output
        dp = grad_output @ v.transpose(-2, -1)
        ds = p * (dp - (dp * p).sum(-1, keepdim=True)) / math.sqrt(q.shape[-1])
        return ds @ k, ds.transpose(-2, -1) @ q, grad_v, None
