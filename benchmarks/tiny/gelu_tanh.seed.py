"""Seed for tiny/gelu_tanh: one program per BLOCK_SIZE-element chunk of the flattened tensor.

tanh is written with exp of a non-positive argument (tanh(|u|) = (1 - e) / (1 + e), e = exp(-2|u|), then the
sign of u), which never overflows and needs no libdevice function, so it runs the same under the interpreter
and on the GPU.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gelu_tanh_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)  # sqrt(2 / pi) * (x + 0.044715 x^3)
    e = tl.exp(-2.0 * tl.abs(inner))
    tanh_abs = (1.0 - e) / (1.0 + e)
    tanh_inner = tl.where(inner >= 0, tanh_abs, -tanh_abs)
    tl.store(out_ptr + offsets, 0.5 * x * (1.0 + tanh_inner), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n_elements = x.numel()
        grid = lambda meta: (triton.cdiv(n_elements, meta["BLOCK_SIZE"]),)
        gelu_tanh_kernel[grid](x, out, n_elements, BLOCK_SIZE=1024, num_warps=4)
        return out
