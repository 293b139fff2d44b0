"""A tiny model for tests/test_model.py: a user-defined projection block (Linear + ReLU, matching ops/linear_relu),
then a Linear + ReLU window of an nn.Sequential (ops/linear_relu at other sizes), then a LayerNorm on 3-D input
(no built-in task at this rank: too small a share to be extracted, or a leaf without a seed)."""

import torch
import torch.nn as nn

ROWS = 24
DIM = 32


class Proj(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.fc = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.fc(x))


def get_model():
    return nn.Sequential(Proj(DIM), nn.Linear(DIM, 16), nn.ReLU())


def get_inputs():
    return [torch.randn(ROWS, DIM)]
