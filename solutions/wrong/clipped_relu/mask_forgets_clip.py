import torch


class ClippedReLUFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_tensor, clip_val):
        ctx.save_for_backward(input_tensor)
        ctx.clip_val = clip_val
        return torch.clamp(input_tensor, 0, clip_val)

    @staticmethod
    def backward(ctx, grad_output):
        (input_tensor,) = ctx.saved_tensors
        # Wrong: this is the plain ReLU mask; inputs above clip_val still get gradient 1.
        return grad_output * (input_tensor > 0), None
