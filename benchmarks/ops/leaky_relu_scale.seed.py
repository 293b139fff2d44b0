"""Seed for ops/leaky_relu_scale: one program per BLOCK_SIZE-element chunk of the flattened NCHW tensor; each
element finds its channel as (index // (H * W)) % C and reads that channel's bias.

The parameter is created exactly as in the task's Model (`bias`, same expression), so the state_dict loads by name.
"""

import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def bias_leaky_relu_kernel(x_ptr, bias_ptr, out_ptr, n_elements, channels, plane, negative_slope, scale,
                           BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    channel = (offsets // plane) % channels
    b = tl.load(bias_ptr + channel, mask=mask, other=0.0)
    v = x + b
    tl.store(out_ptr + offsets, tl.where(v >= 0, v, v * negative_slope) * scale, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, channels: int, negative_slope: float = 0.2, scale: float = math.sqrt(2.0)):
        super().__init__()
        self.negative_slope = negative_slope
        self.scale = scale
        self.bias = nn.Parameter(0.5 * torch.randn(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n_elements = x.numel()
        plane = x.shape[2] * x.shape[3]
        grid = lambda meta: (triton.cdiv(n_elements, meta["BLOCK_SIZE"]),)
        bias_leaky_relu_kernel[grid](
            x, self.bias.contiguous(), out, n_elements, x.shape[1], plane, self.negative_slope, self.scale,
            BLOCK_SIZE=1024, num_warps=4,
        )
        return out
