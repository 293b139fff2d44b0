"""Batch normalisation in inference mode over an NCHW feature map: (x - running_mean[c]) / sqrt(running_var[c] +
eps) * weight[c] + bias[c] (a per-channel affine map, as in a ResNet stage in eval mode).

The statistics are buffers and the affine parameters are parameters, all created away from their neutral values,
so a candidate that ignores any of them is caught. F.batch_norm(training=False) is called directly, so the module's
train/eval flag does not matter and the buffers are never updated.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 31
CHANNELS = 64
HEIGHT = 64
WIDTH = 64

# Natively the sizes above are the benchmark shape; under Triton's interpreter (CPU) the evaluator uses these.
INTERPRETER_SHAPE = {"BATCH": 8, "HEIGHT": 28, "WIDTH": 28}
SHAPES = [{"BATCH": 3, "CHANNELS": 5, "HEIGHT": 7, "WIDTH": 9}, {"BATCH": 1, "CHANNELS": 3, "HEIGHT": 1, "WIDTH": 127}]


class Model(nn.Module):
    def __init__(self, channels: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(channels))
        self.bias = nn.Parameter(0.1 * torch.randn(channels))
        self.register_buffer("running_mean", 0.5 * torch.randn(channels))
        self.register_buffer("running_var", 0.5 + torch.rand(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias, training=False,
                            eps=self.eps)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH) * 1.5 + 0.5]


def get_init_inputs():
    return [CHANNELS]
