import torch
import torch.nn as nn


class Model(nn.Module):
    """Degenerate on purpose: builds a projection and never uses it (dead code), so the weights do not matter."""

    def __init__(self, dim: int):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        unused = self.proj(x)  # noqa: F841 - computed, then dropped
        return torch.tanh(x) * 2.0


batch_size = 8
dim = 32


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [dim]
