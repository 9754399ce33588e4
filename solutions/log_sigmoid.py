"""Reference solution for the `log_sigmoid` exercise.

y = log(sigmoid(x)) = -log(1 + exp(-x)). Its derivative is
sigmoid'(x) / sigmoid(x) = 1 - sigmoid(x) = sigmoid(-x). Forward and backward are
both written so that no exp ever sees a large positive number: they stay finite
at x = -1000 and x = 1000, where the textbook formulas give -inf and nan.
"""

import torch


class MyLogSigmoid(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        # min(x, 0) - log1p(exp(-|x|)) equals -log(1 + exp(-x)) for every x, and
        # exp only receives -|x| <= 0, so it cannot overflow. log1p keeps its
        # digits when exp(-|x|) is tiny.
        ctx.save_for_backward(x)
        return torch.clamp(x, max=0) - torch.log1p(torch.exp(-x.abs()))

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        # d/dx log(sigmoid(x)) = 1 - sigmoid(x) = sigmoid(-x). torch.sigmoid is
        # stable at both ends (sigmoid(-x) is 1 for x -> -inf, 0 for x -> +inf),
        # unlike exp(-x) / (1 + exp(-x)), which is inf / inf = nan for very
        # negative x.
        return grad_output * torch.sigmoid(-x)
