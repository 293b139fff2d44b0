"""Group normalisation of an NCHW feature map with a per-channel affine map (as in diffusion U-Nets).

Statistics are over each (sample, group of C / G channels) block, biased variance, as nn.GroupNorm. The
parameters are held directly as `weight` and `bias` and start away from ones/zeros.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 31
CHANNELS = 64
GROUPS = 8
HEIGHT = 64
WIDTH = 64

# Natively the sizes above are the benchmark shape; under Triton's interpreter (CPU) the evaluator uses these.
INTERPRETER_SHAPE = {"BATCH": 4, "HEIGHT": 32, "WIDTH": 32}
SHAPES = [
    {"BATCH": 2, "CHANNELS": 12, "GROUPS": 3, "HEIGHT": 7, "WIDTH": 9},
    {"BATCH": 1, "CHANNELS": 6, "GROUPS": 2, "HEIGHT": 33, "WIDTH": 65},
]


class Model(nn.Module):
    def __init__(self, num_groups: int, channels: int, eps: float = 1e-5):
        super().__init__()
        self.num_groups = num_groups
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(channels))
        self.bias = nn.Parameter(0.1 * torch.randn(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH) * 2.0 + 0.5]


def get_init_inputs():
    return [GROUPS, CHANNELS]
