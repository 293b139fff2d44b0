"""Seed for ops/cross_entropy: two deterministic stages (no atomics).

Stage 1: one program per row computes logsumexp(row) - row[target] in BLOCK_SIZE chunks (max, then sum of
exponentials). Stage 2: a single program sums the per-row losses in BLOCK_SIZE chunks and divides by the row count.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_cross_entropy_kernel(logits_ptr, targets_ptr, loss_ptr, n_cols, row_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    x_row = logits_ptr + row * row_stride
    cols = tl.arange(0, BLOCK_SIZE)

    running_max = tl.full([BLOCK_SIZE], float("-inf"), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        mask = start + cols < n_cols
        running_max = tl.maximum(running_max, tl.load(x_row + start + cols, mask=mask, other=float("-inf")))
    row_max = tl.max(running_max, axis=0)

    running_sum = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=float("-inf"))
        running_sum += tl.where(mask, tl.exp(x - row_max), 0.0)
    log_sum_exp = row_max + tl.log(tl.sum(running_sum, axis=0))

    target = tl.load(targets_ptr + row)
    tl.store(loss_ptr + row, log_sum_exp - tl.load(x_row + target))


@triton.jit
def mean_kernel(values_ptr, out_ptr, n_values, BLOCK_SIZE: tl.constexpr):
    offsets = tl.arange(0, BLOCK_SIZE)
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, n_values, BLOCK_SIZE):
        acc += tl.load(values_ptr + start + offsets, mask=start + offsets < n_values, other=0.0)
    tl.store(out_ptr, tl.sum(acc, axis=0) / n_values)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logits = logits.contiguous()
        targets = targets.contiguous()
        n_rows, n_cols = logits.shape
        losses = torch.empty(n_rows, dtype=torch.float32, device=logits.device)
        row_cross_entropy_kernel[(n_rows,)](
            logits, targets, losses, n_cols, logits.stride(0), BLOCK_SIZE=1024, num_warps=4
        )
        out = torch.empty((), dtype=logits.dtype, device=logits.device)
        mean_kernel[(1,)](losses, out, n_rows, BLOCK_SIZE=1024, num_warps=4)
        return out
