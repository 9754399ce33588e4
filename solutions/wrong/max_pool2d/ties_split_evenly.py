import torch


class MyMaxPool2d(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, kernel_size, stride):
        k, s = kernel_size, stride
        n, c, h, w = x.shape
        windows = x.unfold(2, k, s).unfold(3, k, s)
        ho, wo = windows.shape[2], windows.shape[3]
        values, position = windows.reshape(n, c, ho, wo, k * k).max(dim=-1)
        ctx.save_for_backward(x, position)
        ctx.k, ctx.s = k, s
        return values

    @staticmethod
    def backward(ctx, grad_output):
        x, position = ctx.saved_tensors
        k, s = ctx.k, ctx.s
        n, c, h, w = x.shape
        ho, wo = grad_output.shape[2], grad_output.shape[3]
        top = torch.arange(ho).view(ho, 1, 1, 1) * s
        left = torch.arange(wo).view(1, wo, 1, 1) * s
        # (Ho, Wo, k, k): the flat (H, W) index of every element of every window.
        within = (torch.arange(k).view(k, 1) * w + torch.arange(k).view(1, k)).view(1, 1, k, k)
        every = (top * w + left + within).reshape(1, 1, ho * wo, k * k)
        windows = x.unfold(2, k, s).unfold(3, k, s).reshape(n, c, ho * wo, k * k)
        # Wrong: on a tie the window gradient is shared equally among the tied
        # maxima; the statement sends all of it to the first one.
        is_max = (windows == windows.amax(dim=-1, keepdim=True)).to(grad_output.dtype)
        share = is_max / is_max.sum(dim=-1, keepdim=True)
        g = grad_output.reshape(n, c, ho * wo, 1) * share
        grad_x = grad_output.new_zeros(n, c, h * w)
        grad_x.scatter_add_(2, every.expand(n, c, -1, -1).reshape(n, c, -1), g.reshape(n, c, -1))
        return grad_x.reshape(n, c, h, w), None, None
