"""Seed for ops/rmsnorm_residual: one program per row, two passes in BLOCK_SIZE chunks: the first accumulates
(x + residual)^2, the second recomputes h = x + residual and writes h * rstd * weight.

The parameter is created exactly as in the task's Model (`weight`, same expression), so the state_dict loads by name.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_rmsnorm_kernel(x_ptr, r_ptr, w_ptr, out_ptr, n_cols, row_stride, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    base = row * row_stride
    cols = tl.arange(0, BLOCK_SIZE)

    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        mask = start + cols < n_cols
        h = tl.load(x_ptr + base + start + cols, mask=mask, other=0.0) + tl.load(
            r_ptr + base + start + cols, mask=mask, other=0.0)
        acc += h * h
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)

    for start in range(0, n_cols, BLOCK_SIZE):
        mask = start + cols < n_cols
        h = tl.load(x_ptr + base + start + cols, mask=mask, other=0.0) + tl.load(
            r_ptr + base + start + cols, mask=mask, other=0.0)
        w = tl.load(w_ptr + start + cols, mask=mask, other=0.0)
        tl.store(out_ptr + base + start + cols, h * rstd * w, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(dim))

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        n_cols = x.shape[-1]
        x2d = x.contiguous().view(-1, n_cols)
        r2d = residual.contiguous().view(-1, n_cols)
        out = torch.empty_like(x2d)
        add_rmsnorm_kernel[(x2d.shape[0],)](
            x2d, r2d, self.weight.contiguous(), out, n_cols, x2d.stride(0), self.eps, BLOCK_SIZE=1024, num_warps=4
        )
        return out.view(x.shape)
