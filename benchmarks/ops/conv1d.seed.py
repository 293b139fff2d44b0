"""Seed for ops/conv1d: an implicit GEMM. Output positions (n, l) are the GEMM's rows and output channels its
columns; one program per BLOCK_M x BLOCK_N output tile loops over the kernel taps and, for each, over the input
channels in BLOCK_K chunks: it gathers a (BLOCK_M, BLOCK_K) tile of shifted input positions straight from the
(N, C, L) input (zero padding by masking) and multiplies it with the matching (BLOCK_K, BLOCK_N) tile of the
weight, with tl.dot. The bias is added before the one store.

Parameter scheme: ModelNew holds the same `self.conv = nn.Conv1d(...)` as the task's Model; only its tensors are read.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def conv1d_kernel(
    x_ptr, w_ptr, b_ptr, out_ptr,
    n_positions, c_in, length, c_out, out_len, taps, stride, padding,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # output position: (sample, l) flattened
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # output channel
    offs_k = tl.arange(0, BLOCK_K)                    # input channel within a chunk
    sample = offs_m // out_len
    pos = offs_m % out_len
    m_mask = offs_m < n_positions
    n_mask = offs_n < c_out
    first_src = pos * stride - padding  # input position read by tap 0
    x_tap0 = x_ptr + (sample * c_in * length + first_src)[:, None] + (offs_k * length)[None, :]
    w_tap0 = w_ptr + (offs_n * (c_in * taps))[None, :] + (offs_k * taps)[:, None]  # weight as (C_out, C_in * taps)

    x_step = BLOCK_K * length  # pointer steps from one chunk of input channels to the next
    w_step = BLOCK_K * taps

    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for tap in range(0, taps):
        src = first_src + tap
        src_ok = m_mask & (src >= 0) & (src < length)
        x_ptrs = x_tap0 + tap
        w_ptrs = w_tap0 + tap
        for start in range(0, c_in, BLOCK_K):
            ci_ok = offs_k < c_in - start
            patch = tl.load(x_ptrs, mask=src_ok[:, None] & ci_ok[None, :], other=0.0)
            w_t = tl.load(w_ptrs, mask=n_mask[None, :] & ci_ok[:, None], other=0.0)
            acc += tl.dot(patch, w_t, input_precision="ieee")
            x_ptrs += x_step
            w_ptrs += w_step

    acc += tl.load(b_ptr + offs_n, mask=n_mask, other=0.0)[None, :]
    out_offsets = (sample[:, None] * c_out + offs_n[None, :]) * out_len + pos[:, None]
    tl.store(out_ptr + out_offsets, acc, mask=m_mask[:, None] & n_mask[None, :])


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size=5, stride=1, padding=2, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        w = self.conv.weight.contiguous()
        b = self.conv.bias.contiguous()
        batch, c_in, length = x.shape
        c_out, _, taps = w.shape
        stride, padding = self.conv.stride[0], self.conv.padding[0]
        out_len = (length + 2 * padding - taps) // stride + 1
        out = torch.empty((batch, c_out, out_len), dtype=x.dtype, device=x.device)
        n_positions = batch * out_len
        grid = lambda meta: (triton.cdiv(n_positions, meta["BLOCK_M"]), triton.cdiv(c_out, meta["BLOCK_N"]))
        conv1d_kernel[grid](
            x, w, b, out, n_positions, c_in, length, c_out, out_len, taps, stride, padding,
            BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, num_warps=4,
        )
        return out
