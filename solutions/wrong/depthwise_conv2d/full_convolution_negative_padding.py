"""Reference solution for the `depthwise_conv2d` exercise.

Each channel is convolved with its own kernel, and channels never mix:
    out[n, c, i, j] = bias[c] + sum over a, b of
        weight[c, 0, a, b] * xp[n, c, i*stride + a*dilation, j*stride + b*dilation]
where xp is x with `padding` zeros on every side. As in conv2d, read it as one
term per kernel offset (a, b): a strided slice of xp, starting at
(a*dilation, b*dilation), times one number per channel. Each gradient is the
adjoint of that term, summed over offsets.
"""

import torch
import torch.nn.functional as F


def _taps(offset, stride, count):
    # The rows (or columns) read at one kernel offset, one per output row.
    return slice(offset, offset + stride * (count - 1) + 1, stride)


class MyDepthwiseConv2d(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, stride, padding, dilation):
        n, c, h, w = x.shape
        _, _, kh, kw = weight.shape
        xp = F.pad(x, (padding, padding, padding, padding))
        ho = (h + 2 * padding - dilation * (kh - 1) - 1) // stride + 1
        wo = (w + 2 * padding - dilation * (kw - 1) - 1) // stride + 1
        out = bias.view(1, c, 1, 1).expand(n, c, ho, wo).clone()
        for a in range(kh):
            for b in range(kw):
                patch = xp[:, :, _taps(a * dilation, stride, ho), _taps(b * dilation, stride, wo)]
                out += patch * weight[:, 0, a, b].view(1, c, 1, 1)
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
        grad_x = grad_weight = grad_bias = None
        if ctx.needs_input_grad[0]:
            grad_xp = torch.zeros_like(xp)
        if ctx.needs_input_grad[1]:
            grad_weight = torch.zeros_like(weight)
        for a in range(kh):
            for b in range(kw):
                rows, cols = _taps(a * d, s, ho), _taps(b * d, s, wo)
                if ctx.needs_input_grad[0]:
                    # Each output pixel sends its gradient, times its channel's
                    # tap, back to the pixel it read; windows may overlap: add.
                    grad_xp[:, :, rows, cols] += grad_output * weight[:, 0, a, b].view(1, c, 1, 1)
                if ctx.needs_input_grad[1]:
                    # One tap serves every output pixel of every example of its
                    # channel, and no other channel.
                    grad_weight[:, 0, a, b] = (grad_output * xp[:, :, rows, cols]).sum(
                        dim=(0, 2, 3)
                    )
        if ctx.needs_input_grad[0]:
            # Wrong: the textbook "full convolution" with the flipped kernel, padded by
            # d*(k-1) - p. Right while the padding reaches no further than the kernel
            # (p <= d*(k-1)); past that the padding it asks conv2d for is negative.
            spread = grad_output.new_zeros(x.shape[0], c, s * (ho - 1) + 1, s * (wo - 1) + 1)
            spread[:, :, ::s, ::s] = grad_output
            extra_h = h + 2 * p - d * (kh - 1) - 1 - s * (ho - 1)
            extra_w = w + 2 * p - d * (kw - 1) - 1 - s * (wo - 1)
            spread = F.pad(spread, (0, extra_w, 0, extra_h))
            grad_x = F.conv2d(
                spread,
                weight.flip(-2, -1),
                padding=(d * (kh - 1) - p, d * (kw - 1) - p),
                dilation=d,
                groups=c,
            )
        if ctx.needs_input_grad[2]:
            grad_bias = grad_output.sum(dim=(0, 2, 3))
        # stride, padding and dilation are Python ints: no gradients.
        return grad_x, grad_weight, grad_bias, None, None, None
