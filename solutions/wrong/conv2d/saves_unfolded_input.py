"""Wrong for the follow-up `save_less`: right gradients, but forward keeps the
unfolded input (im2col) for backward.

Written as im2col, a convolution is one matrix product, and the columns are
what the weight's gradient reads. But with k × k windows and stride 1 every
input element is copied into up to k² columns: for a 3x3 kernel the columns are
about nine times x, kept until backward, when x and the weight give them back.
"""

import torch
import torch.nn.functional as F


class MyConv2d(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, stride, padding):
        n, _, h, w = x.shape
        c_out, _, kh, kw = weight.shape
        ho = (h + 2 * padding - kh) // stride + 1
        wo = (w + 2 * padding - kw) // stride + 1
        # (N, C·kh·kw, Ho·Wo): one column per output pixel.
        columns = F.unfold(x, (kh, kw), padding=padding, stride=stride)
        out = weight.reshape(c_out, -1) @ columns + bias.view(1, c_out, 1)
        # Wrong for the follow-up: the columns, about k² times x when windows overlap.
        ctx.save_for_backward(columns, weight)
        ctx.stride, ctx.padding, ctx.size = stride, padding, (h, w)
        return out.reshape(n, c_out, ho, wo)

    @staticmethod
    def backward(ctx, grad_output):
        columns, weight = ctx.saved_tensors
        n, c_out = grad_output.shape[:2]
        _, _, kh, kw = weight.shape
        g = grad_output.reshape(n, c_out, -1)  # (N, O, Ho·Wo)
        grad_x = grad_weight = grad_bias = None
        if ctx.needs_input_grad[0]:
            # Each column's gradient, added back to the input elements it copied.
            grad_columns = weight.reshape(c_out, -1).T @ g
            grad_x = F.fold(
                grad_columns, ctx.size, (kh, kw), padding=ctx.padding, stride=ctx.stride
            )
        if ctx.needs_input_grad[1]:
            grad_weight = (g @ columns.transpose(1, 2)).sum(dim=0).reshape(weight.shape)
        if ctx.needs_input_grad[2]:
            grad_bias = grad_output.sum(dim=(0, 2, 3))
        return grad_x, grad_weight, grad_bias, None, None
