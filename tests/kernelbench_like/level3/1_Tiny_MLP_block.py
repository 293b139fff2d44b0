import torch
import torch.nn as nn


class Model(nn.Module):
    """LayerNorm -> Linear -> ReLU -> Linear with a residual: a small transformer-style MLP block."""

    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, hidden)
        self.down = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.relu(self.up(self.norm(x))))


batch_size = 4
seq = 6
dim = 16
hidden = 64


def get_inputs():
    return [torch.randn(batch_size, seq, dim)]


def get_init_inputs():
    return [dim, hidden]
