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
        # Wrong: the mean divides by N = diff.numel(); this is the gradient of the sum.
        grad = grad_output * 2.0 * diff
        return grad, -grad
