"""Reference solution for the `max_pool2d` exercise.

Each output element is the maximum of one kernel_size x kernel_size window of
its (n, c) plane, the windows starting every `stride` rows and columns. The
maximum is a copy of one input element, so each window sends its upstream
value to that one element. Windows may overlap (stride < kernel_size): an
element that is the chosen maximum of several windows collects all their
upstream values. On a tie, the window's gradient goes to the first maximal
element in row-major order within the window, as torch does.
"""

import torch


class MyMaxPool2d(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, kernel_size, stride):
        k, s = kernel_size, stride
        n, c, _, w = x.shape
        # (N, C, Ho, Wo, k, k): every window, without copying.
        windows = x.unfold(2, k, s).unfold(3, k, s)
        ho, wo = windows.shape[2], windows.shape[3]
        flat = windows.reshape(n, c, ho, wo, k * k)
        # argmax returns the first maximal position: ties go to the element
        # that comes first in row-major order within the window.
        values, position = flat.max(dim=-1)
        # The chosen element's coordinates in the (H, W) plane, flattened.
        rows = torch.arange(ho, device=x.device).view(ho, 1) * s + position // k
        cols = torch.arange(wo, device=x.device).view(1, wo) * s + position % k
        ctx.save_for_backward(rows * w + cols)
        ctx.x_shape = x.shape
        return values

    @staticmethod
    def backward(ctx, grad_output):
        (source,) = ctx.saved_tensors
        n, c, h, w = ctx.x_shape
        grad_x = grad_output.new_zeros(n, c, h * w)
        # Add (never assign: overlapping windows may pick the same element) each
        # window's upstream value at the element it copied.
        grad_x.scatter_add_(2, source.reshape(n, c, -1), grad_output.reshape(n, c, -1))
        # kernel_size and stride are Python ints: no gradients.
        return grad_x.reshape(n, c, h, w), None, None
