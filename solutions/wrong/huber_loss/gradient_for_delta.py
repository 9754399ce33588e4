import torch


class MyHuberLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, prediction, target, delta):
        diff = prediction - target
        ctx.save_for_backward(diff)
        ctx.delta = delta
        absdiff = diff.abs()
        per_element = torch.where(
            absdiff <= delta, 0.5 * diff * diff, delta * (absdiff - 0.5 * delta)
        )
        return per_element.mean()

    @staticmethod
    def backward(ctx, grad_output):
        (diff,) = ctx.saved_tensors
        delta, n = ctx.delta, diff.numel()
        grad = grad_output * diff.clamp(-delta, delta) / n
        # Wrong: delta is a Python float; its gradient must be None, not a tensor.
        grad_delta = grad_output * torch.where(diff.abs() > delta, diff.abs() - delta, 0.0).mean()
        return grad, -grad, grad_delta
