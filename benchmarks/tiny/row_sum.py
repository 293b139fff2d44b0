"""Sum over the last dimension of a 2-D fp32 tensor (reduction; output has one value per row)."""

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
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=-1)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
