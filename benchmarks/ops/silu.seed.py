"""Seed for ops/silu: one program per BLOCK_SIZE-element chunk of the flattened tensor.

sigmoid is computed from exp(-|x|), which never overflows: 1 / (1 + e) for x >= 0, e / (1 + e) otherwise.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def silu_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    e = tl.exp(-tl.abs(x))
    sigmoid = tl.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
    tl.store(out_ptr + offsets, x * sigmoid, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n_elements = x.numel()
        grid = lambda meta: (triton.cdiv(n_elements, meta["BLOCK_SIZE"]),)
        silu_kernel[grid](x, out, n_elements, BLOCK_SIZE=1024, num_warps=4)
        return out
