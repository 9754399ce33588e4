import torch


class GradientReversalFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, lambd):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad_output):
        # Wrong: the sign is reversed but lambd is dropped: the adversarial
        # gradient always comes at full strength, whatever the schedule says.
        return -grad_output, None
