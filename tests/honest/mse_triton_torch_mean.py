# task: mse_loss
# expect: ok
# max-abs-error: 1e-5
# why: honest hybrid loss (as in Liger-Kernel): a Triton kernel computes every squared difference, torch.mean
#   reduces them to the scalar; PyTorch reads half of what the reference's mse_loss reads, and the kernel does
#   the per-element work, so the rule for PyTorch inside a candidate accepts it
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
