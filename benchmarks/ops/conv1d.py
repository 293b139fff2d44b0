"""1-D convolution, kernel 5, stride 1, padding 2, with bias (nn.Conv1d; e.g. a speech or sequence model's
temporal convolution). x is (batch, channels, length)."""

import torch
import torch.nn as nn

BATCH = 8
IN_CHANNELS = 128
OUT_CHANNELS = 128
LENGTH = 2048

# Natively the sizes above are the benchmark shape; under Triton's interpreter (CPU) the evaluator uses these.
INTERPRETER_SHAPE = {"BATCH": 4, "IN_CHANNELS": 64, "OUT_CHANNELS": 64, "LENGTH": 512}
SHAPES = [
    {"BATCH": 1, "IN_CHANNELS": 3, "OUT_CHANNELS": 17, "LENGTH": 127},
    {"BATCH": 3, "IN_CHANNELS": 7, "OUT_CHANNELS": 5, "LENGTH": 4},
]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size=5, stride=1, padding=2, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(BATCH, IN_CHANNELS, LENGTH)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS]
