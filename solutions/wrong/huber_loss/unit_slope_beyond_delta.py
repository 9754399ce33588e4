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
        # Wrong: beyond delta the slope of delta * (|d| - delta / 2) is delta * sign(d), not sign(d).
        slope = torch.where(diff.abs() <= delta, diff, torch.sign(diff))
        grad = grad_output * slope / n
        return grad, -grad, None
