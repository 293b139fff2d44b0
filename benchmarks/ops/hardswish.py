"""Hard swish, x * relu6(x + 3) / 6, over an NCHW feature map (MobileNetV3's activation, elementwise)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 31
CHANNELS = 64
HEIGHT = 64
WIDTH = 64

# Natively the sizes above are the benchmark shape; under Triton's interpreter (CPU) the evaluator uses these.
INTERPRETER_SHAPE = {"BATCH": 8, "HEIGHT": 32, "WIDTH": 32}
SHAPES = [{"BATCH": 3, "CHANNELS": 5, "HEIGHT": 7, "WIDTH": 9}, {"BATCH": 1, "CHANNELS": 1, "HEIGHT": 1, "WIDTH": 127}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.hardswish(x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH) * 3.0]


def get_init_inputs():
    return []
