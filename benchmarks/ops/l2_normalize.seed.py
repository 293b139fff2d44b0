"""Seed for ops/l2_normalize: one program per row, two passes in BLOCK_SIZE chunks (sum of squares, rescale)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def l2_normalize_kernel(x_ptr, out_ptr, n_cols, row_stride, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * row_stride
    out_row = out_ptr + row * row_stride
    cols = tl.arange(0, BLOCK_SIZE)
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=0.0)
        acc += x * x
    norm = tl.maximum(tl.sqrt(tl.sum(acc, axis=0)), eps)
    for start in range(0, n_cols, BLOCK_SIZE):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=0.0)
        tl.store(out_row + start + cols, x / norm, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, eps: float = 1e-12):
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n_cols = x.shape[-1]
        x2d = x.contiguous().view(-1, n_cols)
        out = torch.empty_like(x2d)
        l2_normalize_kernel[(x2d.shape[0],)](x2d, out, n_cols, x2d.stride(0), self.eps, BLOCK_SIZE=1024, num_warps=4)
        return out.view(x.shape)
