"""Reference solution for the `conv2d` exercise.

out[n, o, i, j] = bias[o] + sum over c, a, b of
    weight[o, c, a, b] * xp[n, c, i*stride + a, j*stride + b],
where xp is x with `padding` zeros on every side. Written as one term per
kernel offset (a, b): for a fixed offset, the input elements it reads form a
strided slice of xp, `xp[:, :, a : a + stride*(Ho-1) + 1 : stride, ...]`, and
the term is a channel-mixing matrix product, like a linear layer applied at
every output pixel. Each of the three gradients is the adjoint of that.
"""

import torch
import torch.nn.functional as F


def _window(offset, stride, count):
    # The positions offset, offset + stride, ..., one per output row (or column).
    return slice(offset, offset + stride * (count - 1) + 1, stride)


class MyConv2d(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, stride, padding):
        n, _, h, w = x.shape
        c_out, _, kh, kw = weight.shape
        xp = F.pad(x, (padding, padding, padding, padding))
        ho = (h + 2 * padding - kh) // stride + 1
        wo = (w + 2 * padding - kw) // stride + 1
        out = bias.view(1, c_out, 1, 1).expand(n, c_out, ho, wo).clone()
        for a in range(kh):
            for b in range(kw):
                patch = xp[:, :, _window(a, stride, ho), _window(b, stride, wo)]
                out += torch.einsum("nchw,oc->nohw", patch, weight[:, :, a, b])
        ctx.save_for_backward(x, weight)
        ctx.stride, ctx.padding = stride, padding
        return out

    @staticmethod
    def backward(ctx, grad_output):
        x, weight = ctx.saved_tensors
        s, p = ctx.stride, ctx.padding
        _, _, h, w = x.shape
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
                rows, cols = _window(a, s, ho), _window(b, s, wo)
                if ctx.needs_input_grad[0]:
                    # Every output pixel sends g @ W[:, :, a, b] back to the one
                    # input pixel it read at this offset; different outputs
                    # may read the same input (overlap), so add.
                    grad_xp[:, :, rows, cols] += torch.einsum(
                        "nohw,oc->nchw", grad_output, weight[:, :, a, b]
                    )
                if ctx.needs_input_grad[1]:
                    # The same weight entry is used at every output pixel of
                    # every example: sum over n, i, j.
                    grad_weight[:, :, a, b] = torch.einsum(
                        "nohw,nchw->oc", grad_output, xp[:, :, rows, cols]
                    )
        if ctx.needs_input_grad[0]:
            # The padding zeros are not inputs: keep the interior only.
            grad_x = grad_xp[:, :, p : p + h, p : p + w]
        if ctx.needs_input_grad[2]:
            # bias[o] is added to every pixel of every example of channel o.
            grad_bias = grad_output.sum(dim=(0, 2, 3))
        # stride and padding are Python ints: no gradients.
        return grad_x, grad_weight, grad_bias, None, None
