"""Wrong: conv2d's five return values: no None for dilation."""

import torch
import torch.nn.functional as F


class MyDepthwiseConv2d(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, stride, padding, dilation):
        n, c, h, w = x.shape
        _, _, kh, kw = weight.shape
        s, p, d = stride, padding, dilation
        xp = F.pad(x, (p, p, p, p))
        ho = (h + 2 * p - d * (kh - 1) - 1) // s + 1
        wo = (w + 2 * p - d * (kw - 1) - 1) // s + 1
        out = bias.view(1, c, 1, 1).expand(n, c, ho, wo).clone()
        for a in range(kh):
            for b in range(kw):
                rows = slice(a * d, a * d + s * (ho - 1) + 1, s)
                cols = slice(b * d, b * d + s * (wo - 1) + 1, s)
                out += xp[:, :, rows, cols] * weight[:, 0, a, b].view(1, c, 1, 1)
        ctx.save_for_backward(x, weight)
        ctx.stride, ctx.padding, ctx.dilation = stride, padding, dilation
        return out

    @staticmethod
    def backward(ctx, grad_output):
        x, weight = ctx.saved_tensors
        s, p, d = ctx.stride, ctx.padding, ctx.dilation
        _, c, h, w = x.shape
        _, _, kh, kw = weight.shape
        _, _, ho, wo = grad_output.shape
        xp = F.pad(x, (p, p, p, p))
        grad_xp = torch.zeros_like(xp)
        grad_weight = torch.zeros_like(weight)
        for a in range(kh):
            for b in range(kw):
                rows = slice(a * d, a * d + s * (ho - 1) + 1, s)
                cols = slice(b * d, b * d + s * (wo - 1) + 1, s)
                grad_xp[:, :, rows, cols] += grad_output * weight[:, 0, a, b].view(1, c, 1, 1)
                grad_weight[:, 0, a, b] = (grad_output * xp[:, :, rows, cols]).sum(dim=(0, 2, 3))
        grad_x = grad_xp[:, :, p : p + h, p : p + w]
        grad_bias = grad_output.sum(dim=(0, 2, 3))
        return grad_x, grad_weight, grad_bias, None, None
