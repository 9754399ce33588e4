"""Wrong: the weight gradients as x.T @ grad_z and h.T @ grad_z: (I, 4H) and (H, 4H)."""

import torch


class MyLSTMCell(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, h, c, w_ih, w_hh, b_ih, b_hh):
        z = x @ w_ih.T + b_ih + h @ w_hh.T + b_hh
        zi, zf, zg, zo = z.chunk(4, dim=1)
        i, f, g, o = torch.sigmoid(zi), torch.sigmoid(zf), torch.tanh(zg), torch.sigmoid(zo)
        c_new = f * c + i * g
        tanh_c = torch.tanh(c_new)
        ctx.save_for_backward(x, h, c, w_ih, w_hh, i, f, g, o, tanh_c)
        return o * tanh_c, c_new

    @staticmethod
    def backward(ctx, grad_h_new, grad_c_new):
        x, h, c, w_ih, w_hh, i, f, g, o, tanh_c = ctx.saved_tensors
        grad_c_total = grad_c_new + grad_h_new * o * (1 - tanh_c * tanh_c)
        grad_i = grad_c_total * g * i * (1 - i)
        grad_f = grad_c_total * c * f * (1 - f)
        grad_g = grad_c_total * i * (1 - g * g)
        grad_o = grad_h_new * tanh_c * o * (1 - o)
        grad_z = torch.cat([grad_i, grad_f, grad_g, grad_o], dim=1)
        grad_bias = grad_z.sum(dim=0)
        return (
            grad_z @ w_ih,
            grad_z @ w_hh,
            grad_c_total * f,
            x.T @ grad_z,
            h.T @ grad_z,
            grad_bias,
            grad_bias,
        )
