"""2-D average pooling, 3x3 window, stride 2, padding 1, padding excluded from the count (count_include_pad=False),
over an NCHW feature map: border windows divide by the number of real pixels they cover."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 8
CHANNELS = 64
HEIGHT = 112
WIDTH = 112

# Natively the sizes above are the benchmark shape; under Triton's interpreter (CPU) the evaluator uses these.
INTERPRETER_SHAPE = {"BATCH": 2, "HEIGHT": 56, "WIDTH": 56}
SHAPES = [{"BATCH": 1, "CHANNELS": 3, "HEIGHT": 15, "WIDTH": 9}, {"BATCH": 2, "CHANNELS": 5, "HEIGHT": 2, "WIDTH": 33}]


class Model(nn.Module):
    def __init__(self, kernel_size: int = 3, stride: int = 2, padding: int = 1):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride
        self.padding = padding

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.avg_pool2d(x, self.kernel_size, self.stride, self.padding, count_include_pad=False)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return []
