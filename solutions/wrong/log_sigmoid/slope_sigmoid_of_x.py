import torch
import torch.nn.functional as F


class MyLogSigmoid(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return F.logsigmoid(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        # log-sigmoid is -softplus(-x), and softplus has slope sigmoid
        return grad_output * torch.sigmoid(x)
