# task: matmul_deep
# expect: ok
# why: honest Triton matmul launched through @triton.autotune (as FlagGems' and Triton's tutorial matmuls are), each
#   block a float32 tl.dot: its rounding order differs from PyTorch's BLAS, which at K=1024 is itself further than
#   atol 1e-4 from the exact product in some values; judged against the float64 reference it is as exact as
#   PyTorch, so it passes (under the interpreter the autotuner runs its first config)
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BM": 64, "BN": 64, "BK": 128}), triton.Config({"BM": 32, "BN": 32, "BK": 64})],
                 key=["M", "N", "K"])
@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :], mask=(rm[:, None] < M) & ((k + rk)[None, :] < K),
                    other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :], mask=((k + rk)[:, None] < K) & (rn[None, :] < N),
                    other=0.0)
        acc += tl.dot(a, b, allow_tf32=False)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a, b = a.contiguous(), b.contiguous()
        M, K = a.shape
        N = b.shape[1]
        c = torch.empty(M, N, dtype=a.dtype, device=a.device)
        matmul_kernel[lambda meta: (triton.cdiv(M, meta["BM"]), triton.cdiv(N, meta["BN"]))](a, b, c, M, N, K)
        return c
