# task: relu
# expect: ok
# max-abs-error: 1e-6
# why: starts from torch.zeros and stores only the positive values (masked stores), then returns a contiguous
#   copy of a transposed view: outputs made of constant fills, kernel stores and copies of them
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


@triton.jit
def positive_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + offs, x, mask=(offs < n) & (x > 0))


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xt = x.t().contiguous()
        out = torch.zeros_like(xt)
        positive_kernel[(triton.cdiv(xt.numel(), 1024),)](xt, out, xt.numel(), BLOCK=1024)
        return out.t().contiguous()
