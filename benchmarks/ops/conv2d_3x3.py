"""2-D convolution, 3x3 kernel, stride 1, padding 1, with bias (nn.Conv2d; a ResNet basic block's convolution)."""

import torch
import torch.nn as nn

BATCH = 8
IN_CHANNELS = 64
OUT_CHANNELS = 64
HEIGHT = 64
WIDTH = 64

# Natively the sizes above are the benchmark shape; under Triton's interpreter (CPU) the evaluator uses these.
INTERPRETER_SHAPE = {"BATCH": 2, "HEIGHT": 32, "WIDTH": 32}
SHAPES = [
    {"BATCH": 1, "IN_CHANNELS": 3, "OUT_CHANNELS": 17, "HEIGHT": 15, "WIDTH": 9},
    {"BATCH": 2, "IN_CHANNELS": 5, "OUT_CHANNELS": 8, "HEIGHT": 1, "WIDTH": 33},
]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, stride=1, padding=1, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(BATCH, IN_CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS]
