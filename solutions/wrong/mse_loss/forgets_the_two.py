import torch


class MyMSELoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, prediction, target):
        diff = prediction - target
        ctx.save_for_backward(diff)
        return (diff**2).mean()

    @staticmethod
    def backward(ctx, grad_output):
        (diff,) = ctx.saved_tensors
        # Wrong: d(diff**2) = 2 * diff; the factor 2 is missing.
        grad = grad_output * diff / diff.numel()
        return grad, -grad
