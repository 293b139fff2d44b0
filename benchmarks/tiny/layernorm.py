"""Layer normalisation over the last dimension with a learned weight and bias (row-wise).

The parameters are held directly as `weight` and `bias` (not inside nn.LayerNorm) and start away from
ones/zeros, so a candidate that ignores them is caught.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 1984
DIM = 4096

# Natively the sizes above are the benchmark shape; under Triton's interpreter (CPU) the evaluator uses these.
INTERPRETER_SHAPE = {"BATCH": 16, "DIM": 1024}
SHAPES = [{"BATCH": 67, "DIM": 1000}, {"BATCH": 3, "DIM": 4099}]
# Its correctness variants there: the same edge cases in a few programs each (it runs every program in Python).
INTERPRETER_SHAPES = [{"BATCH": 5, "DIM": 1000}, {"BATCH": 3, "DIM": 4099}]


class Model(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.dim = dim
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(dim))
        self.bias = nn.Parameter(0.1 * torch.randn(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, (self.dim,), self.weight, self.bias, self.eps)


def get_inputs():
    return [torch.randn(BATCH, DIM) * 2.0 + 0.5]


def get_init_inputs():
    return [DIM]
