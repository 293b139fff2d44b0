"""Seed for ops/col_sum: one program per BLOCK_N columns, walking down the rows in BLOCK_M-row tiles and summing
each tile over its rows into a per-column accumulator."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def col_sum_kernel(x_ptr, out_ptr, n_rows, n_cols, row_stride, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    rows = tl.arange(0, BLOCK_M)
    col_mask = cols < n_cols
    ptrs = x_ptr + rows[:, None] * row_stride + cols[None, :]
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for start in range(0, n_rows, BLOCK_M):
        tile = tl.load(ptrs, mask=(rows[:, None] < n_rows - start) & col_mask[None, :], other=0.0)
        acc += tl.sum(tile, axis=0)
        ptrs += BLOCK_M * row_stride
    tl.store(out_ptr + cols, acc, mask=col_mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n_rows, n_cols = x.shape
        out = torch.empty(n_cols, dtype=x.dtype, device=x.device)
        grid = lambda meta: (triton.cdiv(n_cols, meta["BLOCK_N"]),)
        col_sum_kernel[grid](x, out, n_rows, n_cols, x.stride(0), BLOCK_M=64, BLOCK_N=128, num_warps=4)
        return out
