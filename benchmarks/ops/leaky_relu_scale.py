"""Bias, leaky ReLU and a constant gain over an NCHW feature map (StyleGAN2's FusedLeakyReLU, elementwise).

out = leaky_relu(x + bias[c], 0.2) * sqrt(2). The per-channel bias starts away from zero, so a candidate that
ignores it is caught.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 31
CHANNELS = 64
HEIGHT = 64
WIDTH = 64

# Natively the sizes above are the benchmark shape; under Triton's interpreter (CPU) the evaluator uses these.
INTERPRETER_SHAPE = {"BATCH": 8, "HEIGHT": 32, "WIDTH": 32}
SHAPES = [{"BATCH": 3, "CHANNELS": 5, "HEIGHT": 7, "WIDTH": 9}, {"BATCH": 1, "CHANNELS": 3, "HEIGHT": 1, "WIDTH": 127}]


class Model(nn.Module):
    def __init__(self, channels: int, negative_slope: float = 0.2, scale: float = math.sqrt(2.0)):
        super().__init__()
        self.negative_slope = negative_slope
        self.scale = scale
        self.bias = nn.Parameter(0.5 * torch.randn(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.leaky_relu(x + self.bias.view(1, -1, 1, 1), self.negative_slope) * self.scale


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [CHANNELS]
