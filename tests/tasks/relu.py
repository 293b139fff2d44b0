"""ReLU. Inputs come from torch.rand, so they are non-negative on purpose: an identity "kernel" passes on them and is
caught only by the evaluator's second input distribution (standard normal, large magnitudes)."""

import torch
import torch.nn as nn

batch_size = 16
dim = 512

SHAPES = [{"batch_size": 3, "dim": 1001}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
