import torch


class MyGRUCell(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, h, w_ih, w_hh, b_ih, b_hh):
        gi = x @ w_ih.T + b_ih
        gh = h @ w_hh.T + b_hh
        gi_r, gi_z, gi_n = gi.chunk(3, dim=1)
        gh_r, gh_z, gh_n = gh.chunk(3, dim=1)
        r = torch.sigmoid(gi_r + gh_r)
        z = torch.sigmoid(gi_z + gh_z)
        n = torch.tanh(gi_n + r * gh_n)
        h_new = (1 - z) * n + z * h
        # The gates give every local slope; gh_n (bias included) is what r scales.
        # Wrong: r scales W_hn h + b_hn in forward; this keeps W_hn h without b_hn.
        hn = (h @ w_hh.T).chunk(3, dim=1)[2]
        ctx.save_for_backward(x, h, w_ih, w_hh, r, z, n, hn)
        return h_new

    @staticmethod
    def backward(ctx, grad_h_new):
        x, h, w_ih, w_hh, r, z, n, gh_n = ctx.saved_tensors
        g = grad_h_new
        # h' = (1 - z) * n + z * h
        grad_n_pre = g * (1 - z) * (1 - n * n)  # through n = tanh(...)
        grad_z_pre = g * (h - n) * z * (1 - z)
        grad_r_pre = grad_n_pre * gh_n * r * (1 - r)  # r multiplies gh_n
        grad_gi = torch.cat([grad_r_pre, grad_z_pre, grad_n_pre], dim=1)
        # Wrong: as if n = tanh(gi_n + r * (W_hn h) + b_hn), b_hn outside the reset gate.
        grad_gh = torch.cat([grad_r_pre, grad_z_pre, grad_n_pre], dim=1)
        needs = ctx.needs_input_grad
        grad_x = grad_gi @ w_ih if needs[0] else None
        # h reaches h' twice: through the three gates, and directly as z * h.
        grad_h = grad_gh @ w_hh + g * z if needs[1] else None
        grad_w_ih = grad_gi.T @ x if needs[2] else None
        grad_w_hh = grad_gh.T @ h if needs[3] else None
        grad_b_ih = grad_gi.sum(dim=0) if needs[4] else None
        grad_b_hh = grad_gh.sum(dim=0) if needs[5] else None
        return grad_x, grad_h, grad_w_ih, grad_w_hh, grad_b_ih, grad_b_hh
