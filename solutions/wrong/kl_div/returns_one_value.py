import torch


class MyKLDiv(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, target):
        terms = torch.xlogy(target, target) - target * input
        ctx.save_for_backward(input, target)
        return terms.sum() / input.shape[0]

    @staticmethod
    def backward(ctx, grad_output):
        input, target = ctx.saved_tensors
        # Wrong: forward takes two inputs; backward must return a value (None) for target too.
        return -grad_output * target / input.shape[0]
