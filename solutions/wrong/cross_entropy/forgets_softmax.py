import torch


class MyCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, target):
        n = logits.shape[0]
        log_probs = torch.log_softmax(logits, dim=1)
        ctx.save_for_backward(logits, target)
        return -log_probs[torch.arange(n), target].mean()

    @staticmethod
    def backward(ctx, grad_output):
        logits, target = ctx.saved_tensors
        n = logits.shape[0]
        # the loss is -logits[i, target[i]] + ..., so its slope is -1 at the target
        grad = torch.zeros_like(logits)
        grad[torch.arange(n), target] = -1.0
        return grad * grad_output / n, None
