import torch


class MyMSELoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, prediction, target):
        diff = (prediction - target).reshape(-1)
        ctx.save_for_backward(diff)
        return (diff**2).mean()

    @staticmethod
    def backward(ctx, grad_output):
        (diff,) = ctx.saved_tensors
        grad = grad_output * 2.0 * diff / diff.numel()
        # Wrong: diff was flattened in forward; reshape the gradients back to the inputs' shape.
        return grad, -grad
