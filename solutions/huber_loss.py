"""Reference solution for the `huber_loss` exercise.

With d = prediction - target and N elements, the loss is the mean of
    0.5 d^2                    where |d| <= delta
    delta (|d| - delta / 2)    where |d| >  delta
Per element the slope with respect to d is d inside and delta * sign(d)
outside: d clipped to [-delta, delta]. The two pieces meet with the same
slope, so the comparison used at |d| = delta does not matter. The target
enters with a minus sign, and delta, a Python float, gets None.
"""

import torch


class MyHuberLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, prediction, target, delta):
        diff = prediction - target
        # The difference and delta are all backward needs.
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
        grad_prediction = grad_target = None
        if ctx.needs_input_grad[0] or ctx.needs_input_grad[1]:
            # The slope with respect to d, clipped at +-delta, times 1/N for the mean.
            grad_diff = grad_output * diff.clamp(-ctx.delta, ctx.delta) / diff.numel()
            if ctx.needs_input_grad[0]:
                grad_prediction = grad_diff
            if ctx.needs_input_grad[1]:
                # d = prediction - target: the target's gradient has the opposite sign.
                grad_target = -grad_diff
        return grad_prediction, grad_target, None
