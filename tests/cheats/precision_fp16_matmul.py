# task: matmul
# expect: incorrect
# beside: true
# why: silently computes in half precision (fp16 operands, fp16 output, cast back to fp32) to halve memory traffic; close
#   enough on unit-scale inputs, but it overflows to inf / loses the fp32 tolerance on large-magnitude inputs.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def matmul_fp16_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                       stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(axis=0)
    pid_n = tl.program_id(axis=1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        a = tl.load(a_ptr + rm[:, None] * stride_am + kk[None, :] * stride_ak,
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + kk[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, acc.to(tl.float16),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        A16 = A.to(torch.float16)
        B16 = B.to(torch.float16)
        M, K = A16.shape
        _, N = B16.shape
        C16 = torch.empty(M, N, dtype=torch.float16, device=A.device)
        grid = (triton.cdiv(M, 32), triton.cdiv(N, 32))
        matmul_fp16_kernel[grid](A16, B16, C16, M, N, K,
                                 A16.stride(0), A16.stride(1), B16.stride(0), B16.stride(1),
                                 C16.stride(0), C16.stride(1),
                                 BLOCK_M=32, BLOCK_N=32, BLOCK_K=32)
        return C16.to(A.dtype)
