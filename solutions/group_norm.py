"""Reference solution for the `group_norm` exercise.

The C channels of each sample are split into G groups of C/G consecutive
channels. Each group of one sample, its M = (C/G)·H·W values, is normalised as
one row of layer norm would be:
    rstd = 1 / sqrt(var + eps),  xhat = (x - mu) * rstd
and the affine part is per channel: y = xhat * weight[c] + bias[c]. So, with
gh = grad_output * weight[c] viewed as one row per (sample, group),
    grad_x = rstd * (gh - mean(gh) - xhat * mean(gh * xhat))
with the means over the group's M values, while weight and bias, used at every
position of every sample of their channel, sum over n, h and w.
"""

import torch


class MyGroupNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, num_groups, weight, bias, eps):
        n, c, h, w = x.shape
        # One row per (sample, group): the group's channels and positions together.
        xg = x.reshape(n, num_groups, -1)
        mu = xg.mean(dim=-1, keepdim=True)
        var = ((xg - mu) ** 2).mean(dim=-1, keepdim=True)
        rstd = torch.rsqrt(var + eps)
        xhat = ((xg - mu) * rstd).reshape(n, c, h, w)
        # xhat, rstd (one per sample and group, eps inside) and weight are all
        # backward needs.
        ctx.save_for_backward(xhat, rstd, weight)
        return xhat * weight.view(1, c, 1, 1) + bias.view(1, c, 1, 1)

    @staticmethod
    def backward(ctx, grad_output):
        xhat, rstd, weight = ctx.saved_tensors
        n, c, h, w = grad_output.shape
        groups = rstd.shape[1]
        grad_x = grad_weight = grad_bias = None
        if ctx.needs_input_grad[0]:
            # The gradient for xhat, then back through each group's statistics,
            # exactly as for one row of layer norm.
            gh = (grad_output * weight.view(1, c, 1, 1)).reshape(n, groups, -1)
            xg = xhat.reshape(n, groups, -1)
            grad_x = rstd * (
                gh - gh.mean(dim=-1, keepdim=True) - xg * (gh * xg).mean(dim=-1, keepdim=True)
            )
            grad_x = grad_x.reshape(n, c, h, w)
        # A channel's weight and bias serve every sample and every position.
        if ctx.needs_input_grad[2]:
            grad_weight = (grad_output * xhat).sum(dim=(0, 2, 3))
        if ctx.needs_input_grad[3]:
            grad_bias = grad_output.sum(dim=(0, 2, 3))
        # num_groups and eps are Python numbers: None.
        return grad_x, None, grad_weight, grad_bias, None
