"""Fused elementwise chain of two inputs: (x + y) * y - x, over 2-D fp32 tensors."""

import torch
import torch.nn as nn

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

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return (x + y) * y - x


def get_inputs():
    return [torch.randn(BATCH, DIM), torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
