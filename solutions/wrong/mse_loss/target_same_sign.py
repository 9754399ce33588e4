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
        grad = grad_output * 2.0 * diff / diff.numel()
        # Wrong: target enters as -target, so its gradient is -grad.
        return grad, grad
