"""Seed for ops/row_max: one program per row. Each lane keeps the largest value it has seen and where (chunks are
visited in order and only a strictly larger value replaces, so a lane keeps its first maximum); at the end the row's
maximum is the lanes' maximum and its index the smallest index among the lanes holding it, as in torch.max."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_max_kernel(x_ptr, values_ptr, indices_ptr, n_cols, row_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * row_stride
    cols = tl.arange(0, BLOCK_SIZE)
    best = tl.full([BLOCK_SIZE], float("-inf"), dtype=tl.float32)
    best_index = tl.zeros([BLOCK_SIZE], dtype=tl.int32)
    for start in range(0, n_cols, BLOCK_SIZE):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=float("-inf"))
        better = x > best
        best = tl.where(better, x, best)
        best_index = tl.where(better, start + cols, best_index)
    row_max = tl.max(best, axis=0)
    first = tl.min(tl.where(best == row_max, best_index, n_cols), axis=0)
    tl.store(values_ptr + row, row_max)
    tl.store(indices_ptr + row, first.to(tl.int64))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        n_cols = x.shape[-1]
        x2d = x.contiguous().view(-1, n_cols)
        values = torch.empty(x2d.shape[0], dtype=x.dtype, device=x.device)
        indices = torch.empty(x2d.shape[0], dtype=torch.int64, device=x.device)
        row_max_kernel[(x2d.shape[0],)](x2d, values, indices, n_cols, x2d.stride(0), BLOCK_SIZE=1024, num_warps=4)
        return values.view(x.shape[:-1]), indices.view(x.shape[:-1])
