"""Seed for ops/batchnorm_inference: one program per BLOCK_SIZE-element chunk of the flattened NCHW tensor; each
element finds its channel as (index // (H * W)) % C and applies that channel's affine map.

Parameters and buffers are created exactly as in the task's Model (same names, order and expressions), so the
state_dict loads by name.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def batchnorm_kernel(x_ptr, mean_ptr, var_ptr, w_ptr, b_ptr, out_ptr, n_elements, channels, plane, eps,
                     BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    channel = (offsets // plane) % channels
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    mean = tl.load(mean_ptr + channel, mask=mask, other=0.0)
    var = tl.load(var_ptr + channel, mask=mask, other=1.0)
    w = tl.load(w_ptr + channel, mask=mask, other=0.0)
    b = tl.load(b_ptr + channel, mask=mask, other=0.0)
    tl.store(out_ptr + offsets, (x - mean) / tl.sqrt(var + eps) * w + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, channels: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(channels))
        self.bias = nn.Parameter(0.1 * torch.randn(channels))
        self.register_buffer("running_mean", 0.5 * torch.randn(channels))
        self.register_buffer("running_var", 0.5 + torch.rand(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n_elements = x.numel()
        plane = x.shape[2] * x.shape[3]
        grid = lambda meta: (triton.cdiv(n_elements, meta["BLOCK_SIZE"]),)
        batchnorm_kernel[grid](
            x, self.running_mean.contiguous(), self.running_var.contiguous(), self.weight.contiguous(),
            self.bias.contiguous(), out, n_elements, x.shape[1], plane, self.eps, BLOCK_SIZE=1024, num_warps=4,
        )
        return out
