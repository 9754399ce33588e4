"""Reference solution for the `mse_loss` exercise.

L = mean((prediction - target)**2) over N elements. Each element appears in one
term, so dL/dprediction = 2 * (prediction - target) / N and, since target enters
with a minus sign, dL/dtarget = -dL/dprediction. Both are scaled by the 0-dim
grad_output.
"""

import torch


class MyMSELoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, prediction, target):
        diff = prediction - target
        # The difference is all backward needs; N is diff.numel().
        ctx.save_for_backward(diff)
        return (diff**2).mean()

    @staticmethod
    def backward(ctx, grad_output):
        (diff,) = ctx.saved_tensors
        # 2 from the square, 1/N from the mean; the 0-dim grad_output broadcasts.
        grad = grad_output * 2.0 * diff / diff.numel()
        grad_prediction = grad if ctx.needs_input_grad[0] else None
        # d(prediction - target)/d target = -1. Each branch stands on its own, so
        # any subset of inputs may require grad.
        grad_target = -grad if ctx.needs_input_grad[1] else None
        return grad_prediction, grad_target
