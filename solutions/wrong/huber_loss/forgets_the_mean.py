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
        # Wrong: the mean's 1/N is missing.
        grad = grad_output * diff.clamp(-delta, delta)
        return grad, -grad, None
