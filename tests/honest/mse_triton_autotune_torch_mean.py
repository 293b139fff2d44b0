# task: mse_loss
# expect: ok
# max-abs-error: 1e-5
# why: honest hybrid loss through an autotuned Triton launch: the kernel (block size chosen by @triton.autotune)
#   writes each squared difference and torch.mean is the final step, half of the reference's reads
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": 1024}), triton.Config({"BLOCK": 2048})], key=["n"])
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
        squared_diff[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, sq, n)
        return torch.mean(sq)
