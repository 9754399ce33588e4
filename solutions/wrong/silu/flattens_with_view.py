import torch


class MySiLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * torch.sigmoid(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        # Wrong: .view needs compatible strides; a transposed (non-contiguous) grad_output has none.
        g = grad_output.view(-1)
        flat = x.reshape(-1)
        s = torch.sigmoid(flat)
        return (g * s * (1 + flat * (1 - s))).view(x.shape)
