"""Linear layer followed by exact (erf) GELU: gelu(x @ W^T + b), an MLP up-projection with its activation fused.

x is (M, K) and the layer is nn.Linear(K, N) (BERT/ViT-style MLP input projection).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

M = 1024
K = 1024
N = 1024

# Natively the sizes above are the benchmark shape; under Triton's interpreter (CPU) the evaluator uses these.
INTERPRETER_SHAPE = {"M": 256, "K": 512, "N": 512}
SHAPES = [{"M": 127, "K": 100, "N": 65}, {"M": 1, "K": 33, "N": 17}]


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.linear(x))


def get_inputs():
    return [torch.randn(M, K)]


def get_init_inputs():
    return [K, N]
