"""Seed for ops/layernorm_backward: one program per row, four passes in BLOCK_SIZE chunks: the mean, the variance
(giving rstd), the row means of g = dy * w and of g * xhat, then dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
with xhat = (x - mean) * rstd.

The parameter is created exactly as in the task's Model (`weight`, same expression), so the state_dict loads by name.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def layernorm_backward_kernel(dy_ptr, x_ptr, w_ptr, dx_ptr, n_cols, row_stride, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * row_stride
    dy_row = dy_ptr + row * row_stride
    dx_row = dx_ptr + row * row_stride
    cols = tl.arange(0, BLOCK_SIZE)

    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        mask = start + cols < n_cols
        acc += tl.load(x_row + start + cols, mask=mask, other=0.0)
    mean = tl.sum(acc, axis=0) / n_cols

    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=0.0)
        diff = tl.where(mask, x - mean, 0.0)
        acc += diff * diff
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)

    sum_g = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    sum_g_xhat = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=0.0)
        dy = tl.load(dy_row + start + cols, mask=mask, other=0.0)
        w = tl.load(w_ptr + start + cols, mask=mask, other=0.0)
        g = dy * w
        sum_g += g
        sum_g_xhat += tl.where(mask, g * (x - mean) * rstd, 0.0)
    mean_g = tl.sum(sum_g, axis=0) / n_cols
    mean_g_xhat = tl.sum(sum_g_xhat, axis=0) / n_cols

    for start in range(0, n_cols, BLOCK_SIZE):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=0.0)
        dy = tl.load(dy_row + start + cols, mask=mask, other=0.0)
        w = tl.load(w_ptr + start + cols, mask=mask, other=0.0)
        xhat = (x - mean) * rstd
        tl.store(dx_row + start + cols, rstd * (dy * w - mean_g - xhat * mean_g_xhat), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.dim = dim
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(dim))

    def forward(self, grad_output: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        n_cols = x.shape[-1]
        x2d = x.contiguous().view(-1, n_cols)
        dy2d = grad_output.contiguous().view(-1, n_cols)
        dx = torch.empty_like(x2d)
        layernorm_backward_kernel[(x2d.shape[0],)](
            dy2d, x2d, self.weight.detach().contiguous(), dx, n_cols, x2d.stride(0), self.eps,
            BLOCK_SIZE=1024, num_warps=4,
        )
        return dx.view(x.shape)
