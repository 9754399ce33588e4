import torch


class MyExp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input):
        output = torch.exp(input)
        ctx.save_for_backward(output)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        (output,) = ctx.saved_tensors
        # Wrong: .float() makes the gradient float32 even when input is float64.
        return (grad_output * output).float()
