"""Wrong: the x-gradient written as a projection onto x, (h·x)/(x·x) · x.

With h = g·w, the right gradient is r·(h − x·r²·mean(h·x)). This file writes
r²·mean(h·x) as (h·x)/(x·x) · (mean(x²)·r²), the same number on every row with
some energy, and 0/0 = nan on a row of exact zeros (a padding position), where
the right gradient is r·h, finite.
"""

import torch


class MyRMSNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, eps):
        r = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
        ctx.save_for_backward(x, weight, r)
        return x * r * weight

    @staticmethod
    def backward(ctx, grad_output):
        x, weight, r = ctx.saved_tensors
        h = grad_output * weight
        projection = (h * x).sum(-1, keepdim=True) / (x * x).sum(-1, keepdim=True)
        energy = x.pow(2).mean(-1, keepdim=True) * r * r  # 1 − eps·r²
        grad_x = r * (h - x * projection * energy)
        grad_w = (grad_output * x * r).reshape(-1, x.shape[-1]).sum(0)
        return grad_x, grad_w, None
