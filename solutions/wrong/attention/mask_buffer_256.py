"""Wrong: the causal mask comes from a buffer made once for 256 positions (the
nanoGPT way, `block_size = 256`) and sliced to the sequence's length.

Right for every T up to 256; longer sequences get a 256 x 256 mask, which does
not fit their T x T scores.
"""

import math

import torch

BLOCK_SIZE = 256
CAUSAL_MASK = torch.tril(torch.ones(BLOCK_SIZE, BLOCK_SIZE, dtype=torch.bool))


class MyAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal):
        t = q.shape[-2]
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if causal:
            scores = scores.masked_fill(~CAUSAL_MASK[:t, :t], float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        ctx.save_for_backward(k, q, v, probs)
        return probs @ v

    @staticmethod
    def backward(ctx, grad_output):
        k, q, v, probs = ctx.saved_tensors
        grad_probs = grad_output @ v.transpose(-2, -1)
        grad_scores = probs * (grad_probs - (grad_probs * probs).sum(-1, keepdim=True))
        grad_scores = grad_scores / math.sqrt(q.shape[-1])
        return grad_scores @ k, grad_scores.transpose(-2, -1) @ q, probs.transpose(-2, -1) @ grad_output, None
