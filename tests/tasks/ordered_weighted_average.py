"""Ordered weighted average of each row: the row sorted ascending, then a weighted sum with fixed rank weights (an
OWA operator, as in robust aggregation: a sort feeds the arithmetic)."""

import torch
import torch.nn as nn

rows = 32
cols = 128

SHAPES = [{"rows": 5, "cols": 33}]


class Model(nn.Module):
    def __init__(self, cols: int):
        super().__init__()
        ranks = torch.arange(cols, dtype=torch.float32)
        self.register_buffer("weights", torch.softmax(-((ranks - cols / 2) ** 2) / cols, dim=0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ordered = torch.sort(x, dim=-1).values
        return (ordered * self.weights).sum(dim=-1)


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return [cols]
