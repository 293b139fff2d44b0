import torch
import torch.nn as nn
from torch.distributions import Pareto


class Model(nn.Module):
    """Mean hinge loss (a 0-d output) on heavy-tailed predictions and random +-1 labels."""

    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return torch.mean(torch.clamp(1 - predictions * targets, min=0))


batch_size = 64
features = 32


def get_inputs():
    predictions = Pareto(0.5, 2.0).sample((batch_size, features))  # argument checks read values: not on meta
    targets = torch.randint(0, 2, (batch_size, 1)).float() * 2 - 1
    return [predictions, targets]


def get_init_inputs():
    return []
