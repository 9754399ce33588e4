"""Reference solution for the `softplus` exercise.

y = log(1 + exp(x)), whose derivative is exp(x) / (1 + exp(x)) = sigmoid(x).
Forward and backward avoid exp of a large positive number, so they stay finite
at x = 100 in float32 and x = 1000 in float64, where the textbook formulas give
inf and nan.
"""

import torch


class MySoftplus(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        # log(1 + e^x) = max(x, 0) + log(1 + e^-|x|) for every x: the large part of
        # x stays out of the exponential, and exp only receives -|x| <= 0.
        ctx.save_for_backward(x)
        return torch.clamp(x, min=0) + torch.log1p(torch.exp(-x.abs()))

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        # d/dx log(1 + e^x) = e^x / (1 + e^x) = sigmoid(x). torch.sigmoid is stable
        # at both ends; e^x / (1 + e^x) is inf / inf = nan for large x.
        return grad_output * torch.sigmoid(x)
