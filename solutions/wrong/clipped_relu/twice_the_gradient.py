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
        passed_through = (input_tensor > 0) & (input_tensor < ctx.clip_val)
        # Wrong: the slope in the pass-through region is 1, not 2.
        return 2 * grad_output * passed_through, None
