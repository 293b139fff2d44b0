"""Seed for ops/kl_div: two deterministic stages (no atomics).

Stage 1: one program per row. Two passes find both rows' maxima and sums of exponentials (log-sum-exps); a third
sums q_i (log q_i - log p_i) with log q_i = t_i - lse_t and log p_i = s_i - lse_s. Stage 2: a single program sums
the per-row values in BLOCK_SIZE chunks and divides by the row count ("batchmean").
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_kl_kernel(s_ptr, t_ptr, out_ptr, n_cols, row_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    s_row = s_ptr + row * row_stride
    t_row = t_ptr + row * row_stride
    cols = tl.arange(0, BLOCK_SIZE)

    s_max = tl.full([BLOCK_SIZE], float("-inf"), dtype=tl.float32)
    t_max = tl.full([BLOCK_SIZE], float("-inf"), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        mask = start + cols < n_cols
        s_max = tl.maximum(s_max, tl.load(s_row + start + cols, mask=mask, other=float("-inf")))
        t_max = tl.maximum(t_max, tl.load(t_row + start + cols, mask=mask, other=float("-inf")))
    s_top = tl.max(s_max, axis=0)
    t_top = tl.max(t_max, axis=0)

    s_sum = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    t_sum = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        mask = start + cols < n_cols
        s = tl.load(s_row + start + cols, mask=mask, other=float("-inf"))
        t = tl.load(t_row + start + cols, mask=mask, other=float("-inf"))
        s_sum += tl.where(mask, tl.exp(s - s_top), 0.0)
        t_sum += tl.where(mask, tl.exp(t - t_top), 0.0)
    s_lse = s_top + tl.log(tl.sum(s_sum, axis=0))
    t_lse = t_top + tl.log(tl.sum(t_sum, axis=0))

    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        mask = start + cols < n_cols
        log_p = tl.load(s_row + start + cols, mask=mask, other=0.0) - s_lse
        log_q = tl.load(t_row + start + cols, mask=mask, other=0.0) - t_lse
        acc += tl.where(mask, tl.exp(log_q) * (log_q - log_p), 0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


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

    def forward(self, student_logits: torch.Tensor, teacher_logits: torch.Tensor) -> torch.Tensor:
        n_cols = student_logits.shape[-1]
        s = student_logits.contiguous().view(-1, n_cols)
        t = teacher_logits.contiguous().view(-1, n_cols)
        n_rows = s.shape[0]
        per_row = torch.empty(n_rows, dtype=torch.float32, device=s.device)
        row_kl_kernel[(n_rows,)](s, t, per_row, n_cols, s.stride(0), BLOCK_SIZE=1024, num_warps=4)
        out = torch.empty((), dtype=s.dtype, device=s.device)
        mean_kernel[(1,)](per_row, out, n_rows, BLOCK_SIZE=1024, num_warps=4)
        return out
