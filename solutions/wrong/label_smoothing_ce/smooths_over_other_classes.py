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
        # Wrong: eps is spread over the C - 1 other classes and the label keeps
        # exactly 1 - eps. A common definition, but not torch's, which spreads eps
        # over all C classes, the label included.
        grad = probs - eps / max(classes - 1, 1)
        grad[torch.arange(n), safe_target] += eps / max(classes - 1, 1) - (1 - eps)
        count = keep.sum().clamp(min=1)
        grad = grad * keep.unsqueeze(1).to(grad.dtype) * (grad_output / count)
        return grad, None, None, None
