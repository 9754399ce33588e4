import torch


class MyReLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input):
        ctx.save_for_backward(input)
        return input.clamp(min=0)

    @staticmethod
    def backward(ctx, grad_output):
        (input,) = ctx.saved_tensors
        # Wrong: .view needs a compatible memory layout; a non-contiguous grad_output makes it raise.
        flat = grad_output.view(-1) * (input.view(-1) > 0)
        return flat.view(input.shape)
