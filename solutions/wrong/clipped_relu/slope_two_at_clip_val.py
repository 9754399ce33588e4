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
        slope = passed_through.to(grad_output.dtype)
        # Wrong: exactly at x == clip_val the slope must lie between 0 and 1 (the one-sided slopes); this gives 2.
        slope = slope + 2.0 * (input_tensor == ctx.clip_val)
        return grad_output * slope, None
