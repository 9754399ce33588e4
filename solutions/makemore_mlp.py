"""Reference solution for the `makemore_mlp` exercise.

Karpathy's makemore MLP in one Function, as in "Becoming a backprop ninja":
    emb = C[Xb], embcat = emb flattened to (N, T*d),
    hprebn = embcat @ W1 + b1,
    batch norm over the batch with the Bessel-corrected variance (n - 1):
        bnraw = (hprebn - mean) / sqrt(var + eps), hpreact = bngain * bnraw + bnbias,
    h = tanh(hpreact), logits = h @ W2 + b2, loss = cross_entropy(logits, Yb).
Backward goes layer by layer with one formula per layer (the "collapsed" route):
the gradient at the logits, at h, at hpreact, at hprebn, at embcat, then the rows
of C, each scatter-added from every position that looked it up.
"""

import torch

EPS = 1e-5


class MakemoreMLP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Xb, C, W1, b1, bngain, bnbias, W2, b2, Yb):
        n = Xb.shape[0]
        emb = C[Xb]  # (N, T, d)
        embcat = emb.reshape(n, -1)  # (N, T*d)
        hprebn = embcat @ W1 + b1  # (N, H)
        bnmeani = hprebn.sum(0, keepdim=True) / n
        bndiff = hprebn - bnmeani
        bnvar = (bndiff**2).sum(0, keepdim=True) / (n - 1)  # Bessel's correction
        bnvar_inv = (bnvar + EPS) ** -0.5
        bnraw = bndiff * bnvar_inv
        hpreact = bngain * bnraw + bnbias
        h = torch.tanh(hpreact)
        logits = h @ W2 + b2  # (N, V)
        shifted = logits - logits.amax(1, keepdim=True)
        log_probs = shifted - torch.log(torch.exp(shifted).sum(1, keepdim=True))
        loss = -log_probs[torch.arange(n), Yb].mean()
        # tanh's slope is written with h; batch norm's gradient with bnraw and
        # bnvar_inv; cross-entropy's with the probabilities.
        ctx.save_for_backward(
            Xb, C, embcat, W1, bngain, bnraw, bnvar_inv, h, W2, torch.exp(log_probs), Yb
        )
        return loss

    @staticmethod
    def backward(ctx, grad_output):
        Xb, C, embcat, W1, bngain, bnraw, bnvar_inv, h, W2, probs, Yb = ctx.saved_tensors
        n = Xb.shape[0]
        # cross-entropy, mean over the batch: (softmax - onehot) / n
        dlogits = probs.clone()
        dlogits[torch.arange(n), Yb] -= 1
        dlogits = dlogits * (grad_output / n)
        # logits = h @ W2 + b2
        dh = dlogits @ W2.T
        dW2 = h.T @ dlogits
        db2 = dlogits.sum(0)
        # h = tanh(hpreact)
        dhpreact = (1 - h**2) * dh
        # hpreact = bngain * bnraw + bnbias; bngain and bnbias are (1, H)
        dbngain = (bnraw * dhpreact).sum(0, keepdim=True)
        dbnbias = dhpreact.sum(0, keepdim=True)
        # batch norm, every path at once: the direct one, through the mean and
        # through the variance, whose 1/(n - 1) gives the n/(n - 1)
        dhprebn = (
            bngain
            * bnvar_inv
            / n
            * (
                n * dhpreact
                - dhpreact.sum(0)
                - n / (n - 1) * bnraw * (dhpreact * bnraw).sum(0)
            )
        )
        # hprebn = embcat @ W1 + b1
        dembcat = dhprebn @ W1.T
        dW1 = embcat.T @ dhprebn
        db1 = dhprebn.sum(0)
        # emb = C[Xb]: every position adds its row into the row it looked up
        demb = dembcat.view(*Xb.shape, C.shape[1])
        dC = torch.zeros_like(C)
        dC.index_add_(0, Xb.reshape(-1), demb.reshape(-1, C.shape[1]))
        return None, dC, dW1, db1, dbngain, dbnbias, dW2, db2, None
