"""Matrix multiplication C = A @ B with A (M, K) and B (K, N)."""

import torch
import torch.nn as nn

M = 64
N = 64
K = 64

SHAPES = [{"M": 33, "N": 47, "K": 70}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
