"""nn.Linear with parameters (weight and bias): the candidate's parameters must line up with the reference's."""

import torch
import torch.nn as nn

batch_size = 32
in_features = 128
out_features = 64

SHAPES = [{"batch_size": 5, "in_features": 100, "out_features": 50}]


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
