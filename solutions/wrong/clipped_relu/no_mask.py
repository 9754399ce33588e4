import torch


class ClippedReLUFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_tensor, clip_val):
        ctx.save_for_backward(input_tensor)
        ctx.clip_val = clip_val
        return torch.clamp(input_tensor, 0, clip_val)

    @staticmethod
    def backward(ctx, grad_output):
        # Wrong: passes grad_output through everywhere, as if the function were the identity.
        return grad_output.clone(), None
