# task: matmul
# expect: rejected|incorrect
# beside: true
# why: memoises A @ B keyed by a cheap content fingerprint (shape plus every 61st element of A and B) and returns the
#   very same output tensor on a hit: a timing loop that repeats its inputs times a few element reads instead of a
#   matmul. Caught when the harness poisons or tracks outputs it already received, or perturbs inputs outside the
#   sampled positions.
import torch
import torch.nn as nn
import triton
import triton.language as tl

_cache = {}


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
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
        acc += tl.dot(a, b, input_precision="ieee")
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, acc,
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def _fingerprint(t):
    return (tuple(t.shape), t.dtype, tuple(t.reshape(-1)[::61].tolist()))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        key = (_fingerprint(A), _fingerprint(B))
        hit = _cache.get(key)
        if hit is not None:
            return hit
        M, K = A.shape
        _, N = B.shape
        C = torch.empty(M, N, dtype=A.dtype, device=A.device)
        grid = (triton.cdiv(M, 32), triton.cdiv(N, 32))
        matmul_kernel[grid](A, B, C, M, N, K,
                            A.stride(0), A.stride(1), B.stride(0), B.stride(1), C.stride(0), C.stride(1),
                            BLOCK_M=32, BLOCK_N=32, BLOCK_K=32)
        _cache[key] = C
        return C
