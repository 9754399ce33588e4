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
        # Wrong: the 0-dim grad_output still scales the gradient (the loss may be weighted).
        grad = 2.0 * diff / diff.numel()
        return grad, -grad
