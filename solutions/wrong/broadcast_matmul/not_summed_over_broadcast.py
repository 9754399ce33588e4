import torch


class MyBroadcastMatmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return torch.matmul(a, b)

    @staticmethod
    def backward(ctx, grad_output):
        a, b = ctx.saved_tensors
        # Wrong: left at the output's broadcast batch shape, not reduced to the inputs' shapes.
        return torch.matmul(grad_output, b.mT), torch.matmul(a.mT, grad_output)
