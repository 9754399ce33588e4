import torch


class ClippedReLUFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_tensor, clip_val):
        out = torch.clamp(input_tensor, 0, clip_val)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad_output):
        (out,) = ctx.saved_tensors
        # zero below 0 already, so multiplying by the output masks that side
        return grad_output * out, None
