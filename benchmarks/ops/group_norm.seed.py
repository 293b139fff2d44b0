"""Seed for ops/group_norm: one program per (sample, group). A group is a contiguous span of C / G * H * W
values in NCHW order; three passes over it in BLOCK_SIZE chunks (mean, variance about the mean, normalise and
apply the channel's weight and bias, the channel being group * C / G + offset // (H * W)).

Parameters are created exactly as in the task's Model (`weight` then `bias`), so the state_dict loads by name.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def group_norm_kernel(x_ptr, w_ptr, b_ptr, out_ptr, group_size, channels_per_group, plane, num_groups, eps,
                      BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)  # sample * num_groups + group
    group = pid % num_groups
    base = pid * group_size
    offs = tl.arange(0, BLOCK_SIZE)

    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, group_size, BLOCK_SIZE):
        mask = start + offs < group_size
        acc += tl.load(x_ptr + base + start + offs, mask=mask, other=0.0)
    mean = tl.sum(acc, axis=0) / group_size

    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, group_size, BLOCK_SIZE):
        mask = start + offs < group_size
        x = tl.load(x_ptr + base + start + offs, mask=mask, other=0.0)
        diff = tl.where(mask, x - mean, 0.0)
        acc += diff * diff
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / group_size + eps)

    for start in range(0, group_size, BLOCK_SIZE):
        mask = start + offs < group_size
        x = tl.load(x_ptr + base + start + offs, mask=mask, other=0.0)
        channel = group * channels_per_group + (start + offs) // plane
        w = tl.load(w_ptr + channel, mask=mask, other=0.0)
        b = tl.load(b_ptr + channel, mask=mask, other=0.0)
        tl.store(out_ptr + base + start + offs, (x - mean) * rstd * w + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, num_groups: int, channels: int, eps: float = 1e-5):
        super().__init__()
        self.num_groups = num_groups
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(channels))
        self.bias = nn.Parameter(0.1 * torch.randn(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        batch, channels = x.shape[0], x.shape[1]
        plane = x.numel() // (batch * channels)
        channels_per_group = channels // self.num_groups
        group_size = channels_per_group * plane
        group_norm_kernel[(batch * self.num_groups,)](
            x, self.weight.contiguous(), self.bias.contiguous(), out, group_size, channels_per_group, plane,
            self.num_groups, self.eps, BLOCK_SIZE=1024, num_warps=4,
        )
        return out
