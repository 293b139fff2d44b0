"""Sum over the last dimension: (batch_size, dim) -> (batch_size,)."""

import torch
import torch.nn as nn

batch_size = 32
dim = 1024

SHAPES = [{"batch_size": 5, "dim": 1000}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=-1)


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
