"""Wrong for the follow-up `what_backward_needs`: right gradients, but forward keeps
the input and the output, and backward looks for each window's maximum again.

Both are floats: with 2x2 windows they are 1.25 times the bytes of x, to tell
backward one thing per window, which of its k² elements won. A small integer
per window (or a bool mask the shape of x) says the same.
"""

import torch


class MyMaxPool2d(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, kernel_size, stride):
        k, s = kernel_size, stride
        windows = x.unfold(2, k, s).unfold(3, k, s)
        out = windows.amax(dim=(-2, -1))
        # Wrong for the follow-up: the values, when backward needs positions.
        ctx.save_for_backward(x, out)
        ctx.k, ctx.s = k, s
        return out

    @staticmethod
    def backward(ctx, grad_output):
        x, out = ctx.saved_tensors
        k, s = ctx.k, ctx.s
        n, c, h, w = x.shape
        ho, wo = out.shape[2], out.shape[3]
        windows = x.unfold(2, k, s).unfold(3, k, s).reshape(n, c, ho, wo, k * k)
        # The first element of each window equal to its maximum (argmax of a 0/1
        # tensor returns the first 1): the row-major tie rule.
        position = (windows == out.unsqueeze(-1)).to(torch.uint8).argmax(dim=-1)
        rows = torch.arange(ho).view(ho, 1) * s + position // k
        cols = torch.arange(wo).view(1, wo) * s + position % k
        grad_x = grad_output.new_zeros(n, c, h * w)
        grad_x.scatter_add_(2, (rows * w + cols).reshape(n, c, -1), grad_output.reshape(n, c, -1))
        return grad_x.reshape(n, c, h, w), None, None
