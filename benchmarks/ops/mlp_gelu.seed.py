"""Seed for ops/mlp_gelu: two launches of one tiled linear kernel (one program per BLOCK_M x BLOCK_N output tile,
K in BLOCK_K steps with tl.dot, bias added), the first with exact GELU fused into its epilogue
(APPLY_GELU), writing the hidden activations that the second reads.

Parameter scheme: ModelNew holds the same `fc1` and `fc2` nn.Linear layers as the task's Model, created in the same
order; only their tensors are read here.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def linear_kernel(
    x_ptr, w_ptr, b_ptr, out_ptr,
    M, N, K,
    stride_xm, stride_xk, stride_wn, stride_wk, stride_om, stride_on,
    APPLY_GELU: tl.constexpr,
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
        x = tl.load(x_ptr + offs_m[:, None] * stride_xm + k[None, :] * stride_xk,
                    mask=(offs_m[:, None] < M) & (k[None, :] < K), other=0.0)
        w_t = tl.load(w_ptr + offs_n[None, :] * stride_wn + k[:, None] * stride_wk,
                      mask=(offs_n[None, :] < N) & (k[:, None] < K), other=0.0)
        acc += tl.dot(x, w_t, input_precision="ieee")

    acc += tl.load(b_ptr + offs_n, mask=offs_n < N, other=0.0)[None, :]
    if APPLY_GELU:
        acc = 0.5 * acc * (1.0 + tl.math.erf(acc * 0.7071067811865476))
    tl.store(out_ptr + offs_m[:, None] * stride_om + offs_n[None, :] * stride_on, acc,
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        m = x.shape[0]
        w1, b1 = self.fc1.weight.contiguous(), self.fc1.bias.contiguous()
        w2, b2 = self.fc2.weight.contiguous(), self.fc2.bias.contiguous()
        hidden, dim = w1.shape
        h = torch.empty((m, hidden), dtype=x.dtype, device=x.device)
        grid1 = lambda meta: (triton.cdiv(m, meta["BLOCK_M"]), triton.cdiv(hidden, meta["BLOCK_N"]))
        linear_kernel[grid1](
            x, w1, b1, h, m, hidden, dim,
            x.stride(0), x.stride(1), w1.stride(0), w1.stride(1), h.stride(0), h.stride(1),
            APPLY_GELU=True, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, num_warps=4,
        )
        out = torch.empty((m, dim), dtype=x.dtype, device=x.device)
        grid2 = lambda meta: (triton.cdiv(m, meta["BLOCK_M"]), triton.cdiv(dim, meta["BLOCK_N"]))
        linear_kernel[grid2](
            h, w2, b2, out, m, dim, hidden,
            h.stride(0), h.stride(1), w2.stride(0), w2.stride(1), out.stride(0), out.stride(1),
            APPLY_GELU=False, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, num_warps=4,
        )
        return out
