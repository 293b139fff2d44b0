"""Seed for ops/matmul_residual: one program per BLOCK_M x BLOCK_N output tile, looping over K in BLOCK_K steps
with tl.dot, then adding the bias and the residual tile before the one store.

Parameter scheme: ModelNew holds the same `self.linear = nn.Linear(in_features, out_features)` as the task's Model;
only its tensors are read here.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def linear_residual_kernel(
    x_ptr, w_ptr, b_ptr, r_ptr, out_ptr,
    M, N, K,
    stride_xm, stride_xk, stride_wn, stride_wk, stride_rm, stride_rn, stride_om, stride_on,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)

    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for start in range(0, K, BLOCK_K):
        k = start + offs_k
        x = tl.load(
            x_ptr + offs_m[:, None] * stride_xm + k[None, :] * stride_xk,
            mask=(offs_m[:, None] < M) & (k[None, :] < K), other=0.0,
        )
        w_t = tl.load(
            w_ptr + offs_n[None, :] * stride_wn + k[:, None] * stride_wk,
            mask=(offs_n[None, :] < N) & (k[:, None] < K), other=0.0,
        )
        acc += tl.dot(x, w_t, input_precision="ieee")

    out_mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    acc += tl.load(b_ptr + offs_n, mask=offs_n < N, other=0.0)[None, :]
    acc += tl.load(r_ptr + offs_m[:, None] * stride_rm + offs_n[None, :] * stride_rn, mask=out_mask, other=0.0)
    tl.store(out_ptr + offs_m[:, None] * stride_om + offs_n[None, :] * stride_on, acc, mask=out_mask)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        r = residual.contiguous()
        w = self.linear.weight.contiguous()
        b = self.linear.bias.contiguous()
        m, k = x.shape
        n = w.shape[0]
        out = torch.empty((m, n), dtype=x.dtype, device=x.device)
        grid = lambda meta: (triton.cdiv(m, meta["BLOCK_M"]), triton.cdiv(n, meta["BLOCK_N"]))
        linear_residual_kernel[grid](
            x, w, b, r, out, m, n, k,
            x.stride(0), x.stride(1), w.stride(0), w.stride(1), r.stride(0), r.stride(1), out.stride(0), out.stride(1),
            BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, num_warps=4,
        )
        return out
