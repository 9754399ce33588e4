import torch


class ClippedReLUFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_tensor, clip_val):
        # Wrong: save_for_backward only accepts tensors (or None); clip_val is a float.
        ctx.save_for_backward(input_tensor, clip_val)
        return torch.clamp(input_tensor, 0, clip_val)

    @staticmethod
    def backward(ctx, grad_output):
        input_tensor, clip_val = ctx.saved_tensors
        passed_through = (input_tensor > 0) & (input_tensor < clip_val)
        return grad_output * passed_through, None
