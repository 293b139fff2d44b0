"""Matrix multiplication C = A @ B with a deep inner dimension (K=1024): float32 BLAS rounds visibly here."""

import torch
import torch.nn as nn

M = 192
N = 192
K = 1024

SHAPES = [{"M": 17, "N": 9, "K": 700}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
