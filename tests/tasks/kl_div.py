"""KL divergence between two distributions given as probabilities (KernelBench level 1 style): the inputs are
softmax outputs, so a probe that makes a probability negative leaves the reference's domain (log of a negative)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 16
dim = 256

SHAPES = [{"batch_size": 5, "dim": 100}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.kl_div(torch.log(predictions), targets, reduction="batchmean")


def get_inputs():
    return [torch.randn(batch_size, dim).softmax(dim=-1), torch.randn(batch_size, dim).softmax(dim=-1)]


def get_init_inputs():
    return []
