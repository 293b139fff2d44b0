"""A deep multi-layer perceptron (KernelBench level 3's MLP layout): Linear + ReLU layers in an nn.Sequential and a
final Linear, on a batch of fp32 feature vectors."""

import torch
import torch.nn as nn

BATCH = 256
INPUT = 1024
HIDDEN = [1024, 1024, 512]
OUTPUT = 256


class Model(nn.Module):
    def __init__(self, input_size: int, hidden: list[int], output_size: int):
        super().__init__()
        layers: list[nn.Module] = []
        size = input_size
        for width in hidden:
            layers += [nn.Linear(size, width), nn.ReLU()]
            size = width
        layers.append(nn.Linear(size, output_size))
        self.network = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.network(x)


def get_inputs():
    return [torch.randn(BATCH, INPUT)]


def get_init_inputs():
    return [INPUT, HIDDEN, OUTPUT]
