"""Mish, x * tanh(softplus(x)), over a 2-D fp32 tensor (an elementwise chain: exp, log, tanh, multiply)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 3968
DIM = 2048

# Natively the sizes above are the benchmark shape; under Triton's interpreter (CPU) the evaluator uses these.
INTERPRETER_SHAPE = {"BATCH": 256}
SHAPES = [{"BATCH": 67, "DIM": 1000}, {"BATCH": 1, "DIM": 127}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.mish(x)


def get_inputs():
    return [torch.randn(BATCH, DIM) * 3.0]


def get_init_inputs():
    return []
