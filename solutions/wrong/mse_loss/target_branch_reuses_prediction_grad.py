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
        grad_prediction = grad_target = None
        if ctx.needs_input_grad[0]:
            grad_prediction = grad_output * 2.0 * diff / diff.numel()
        if ctx.needs_input_grad[1]:
            # Wrong: grad_prediction is None when only target requires grad.
            grad_target = -grad_prediction
        return grad_prediction, grad_target
