"""RMS normalisation over the last dimension with a learned weight (row-wise).

The weight starts away from ones, so a candidate that ignores it is caught.
"""

import torch
import torch.nn as nn

BATCH = 1984
DIM = 4096

# Natively the sizes above are the benchmark shape; under Triton's interpreter (CPU) the evaluator uses these.
INTERPRETER_SHAPE = {"BATCH": 16, "DIM": 1024}
SHAPES = [{"BATCH": 67, "DIM": 1000}, {"BATCH": 3, "DIM": 4099}]
# Its correctness variants there: the same edge cases in a few programs each (it runs every program in Python).
INTERPRETER_SHAPES = [{"BATCH": 5, "DIM": 1000}, {"BATCH": 3, "DIM": 4099}]


class Model(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight


def get_inputs():
    return [torch.randn(BATCH, DIM) * 2.0]


def get_init_inputs():
    return [DIM]
