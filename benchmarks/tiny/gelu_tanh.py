"""GELU with the tanh approximation over a 2-D fp32 tensor (elementwise)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 3968
DIM = 2048

# Natively the sizes above are the benchmark shape; under Triton's interpreter (CPU) the evaluator uses these.
INTERPRETER_SHAPE = {"BATCH": 32, "DIM": 1024}
SHAPES = [{"BATCH": 257, "DIM": 1000}, {"BATCH": 1, "DIM": 7}]
# Its correctness variants there: the same edge cases in a few programs each (it runs every program in Python).
INTERPRETER_SHAPES = [{"BATCH": 17, "DIM": 1000}, {"BATCH": 1, "DIM": 7}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x, approximate="tanh")


def get_inputs():
    return [torch.randn(BATCH, DIM) * 3.0]


def get_init_inputs():
    return []
