# task: mse_loss
# expect: rejected
# beside: true
# config: kernels_only=True
# why: the honest hybrid loss of tests/honest/mse_triton_torch_mean.py (a Triton kernel's squared differences,
#   torch.mean of them) under the strict rule for leaderboards (--kernels-only): PyTorch may compute nothing at the
#   output's scale there, so the final mean is refused
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def squared_diff(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    d = tl.load(x_ptr + offs, mask=mask) - tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, d * d, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x, y = x.contiguous(), y.contiguous()
        sq = torch.empty_like(x)
        n = x.numel()
        squared_diff[(triton.cdiv(n, 1024),)](x, y, sq, n, BLOCK=1024)
        return torch.mean(sq)
