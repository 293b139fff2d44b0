"""Seed for ops/gelu_bn_pool: two launches. The first, one program per BLOCK_F features, walks every row in BLOCK_R
steps and writes each feature's mean and 1/std of gelu(x); the second, one program per row, computes gelu(x) again
in BLOCK_F steps, normalises it, applies the outer GELU and writes the row's mean. Nothing of the size of x is kept."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def feature_stats_kernel(x_ptr, mean_ptr, rstd_ptr, rows, cols, eps,
                         BLOCK_R: tl.constexpr, BLOCK_F: tl.constexpr):
    pid = tl.program_id(0)
    offs_f = pid * BLOCK_F + tl.arange(0, BLOCK_F)
    fmask = offs_f < cols
    total = tl.zeros([BLOCK_F], dtype=tl.float32)
    squares = tl.zeros([BLOCK_F], dtype=tl.float32)
    for start in range(0, rows, BLOCK_R):
        offs_r = start + tl.arange(0, BLOCK_R)
        mask = (offs_r[:, None] < rows) & fmask[None, :]
        x = tl.load(x_ptr + offs_r[:, None] * cols + offs_f[None, :], mask=mask, other=0.0)
        g = 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))
        g = tl.where(mask, g, 0.0)
        total += tl.sum(g, axis=0)
        squares += tl.sum(g * g, axis=0)
    mean = total / rows
    var = tl.maximum(squares / rows - mean * mean, 0.0)
    tl.store(mean_ptr + offs_f, mean, mask=fmask)
    tl.store(rstd_ptr + offs_f, 1.0 / tl.sqrt(var + eps), mask=fmask)


@triton.jit
def pool_kernel(x_ptr, mean_ptr, rstd_ptr, out_ptr, cols, BLOCK_F: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK_F], dtype=tl.float32)
    for start in range(0, cols, BLOCK_F):
        offs_f = start + tl.arange(0, BLOCK_F)
        fmask = offs_f < cols
        x = tl.load(x_ptr + row * cols + offs_f, mask=fmask, other=0.0)
        g = 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))
        h = (g - tl.load(mean_ptr + offs_f, mask=fmask, other=0.0)) * tl.load(rstd_ptr + offs_f, mask=fmask, other=0.0)
        acc += tl.where(fmask, 0.5 * h * (1.0 + tl.math.erf(h * 0.7071067811865476)), 0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0) / cols)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        mean = torch.empty(cols, device=x.device, dtype=torch.float32)
        rstd = torch.empty(cols, device=x.device, dtype=torch.float32)
        out = torch.empty(rows, device=x.device, dtype=x.dtype)
        feature_stats_kernel[(triton.cdiv(cols, 64),)](x, mean, rstd, rows, cols, 1e-5, BLOCK_R=32, BLOCK_F=64)
        pool_kernel[(rows,)](x, mean, rstd, out, cols, BLOCK_F=128)
        return out
