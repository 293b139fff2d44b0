"""Seed for ops/row_mean: one program per row, accumulating the row in BLOCK_SIZE chunks, divided by its length."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_mean_kernel(x_ptr, out_ptr, n_cols, row_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * row_stride
    cols = tl.arange(0, BLOCK_SIZE)
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        mask = start + cols < n_cols
        acc += tl.load(x_row + start + cols, mask=mask, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0) / n_cols)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n_cols = x.shape[-1]
        x2d = x.contiguous().view(-1, n_cols)
        out = torch.empty(x2d.shape[0], dtype=x.dtype, device=x.device)
        row_mean_kernel[(x2d.shape[0],)](x2d, out, n_cols, x2d.stride(0), BLOCK_SIZE=1024, num_warps=4)
        return out.view(x.shape[:-1])
