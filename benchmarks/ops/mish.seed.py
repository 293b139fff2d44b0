"""Seed for ops/mish: one program per BLOCK_SIZE-element chunk of the flattened tensor.

tanh(softplus(x)) is computed in closed form: with e = exp(x), tanh(log(1 + e)) = e (e + 2) / (e (e + 2) + 2),
which is accurate for very negative x (no 1 - 1 cancellation) and is taken as 1 above x = 20 (where e * e would
overflow and the true value is 1 to fp32 precision).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def mish_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    e = tl.exp(tl.minimum(x, 20.0))
    n = e * (e + 2.0)
    tanh_softplus = tl.where(x > 20.0, 1.0, n / (n + 2.0))
    tl.store(out_ptr + offsets, x * tanh_softplus, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n_elements = x.numel()
        grid = lambda meta: (triton.cdiv(n_elements, meta["BLOCK_SIZE"]),)
        mish_kernel[grid](x, out, n_elements, BLOCK_SIZE=1024, num_warps=4)
        return out
