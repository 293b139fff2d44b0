# task: linear
# expect: ok
# max-abs-error: 1e-4
# why: honest Triton matmul x @ W^T, the bias added by PyTorch after the kernel (Liger-style glue): the add reads the
#   output and the bias, a sixth of what the reference's linear reads
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def matmul_nt(x_ptr, w_ptr, out_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        x = tl.load(x_ptr + rm[:, None] * K + (k + rk)[None, :], mask=(rm[:, None] < M) & ((k + rk)[None, :] < K),
                    other=0.0)
        w = tl.load(w_ptr + rn[None, :] * K + (k + rk)[:, None], mask=(rn[None, :] < N) & ((k + rk)[:, None] < K),
                    other=0.0)
        acc += tl.dot(x, w, allow_tf32=False)
    tl.store(out_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        w = self.linear.weight.contiguous()
        M, K = x.shape
        N = w.shape[0]
        out = torch.empty(M, N, dtype=x.dtype, device=x.device)
        matmul_nt[(triton.cdiv(M, 32), triton.cdiv(N, 32))](x, w, out, M, N, K, BM=32, BN=32, BK=32)
        return out + self.linear.bias
