"""Mean squared error between two 2-D fp32 tensors (full reduction to a 0-d scalar)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 1984
DIM = 4096

# Natively the sizes above are the benchmark shape; under Triton's interpreter (CPU) the evaluator uses these.
INTERPRETER_SHAPE = {"BATCH": 16, "DIM": 1024}
SHAPES = [{"BATCH": 67, "DIM": 1000}, {"BATCH": 1, "DIM": 7}]
# Its correctness variants there: the same edge cases in a few programs each (it runs every program in Python).
INTERPRETER_SHAPES = [{"BATCH": 5, "DIM": 1000}, {"BATCH": 1, "DIM": 7}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.mse_loss(predictions, targets)


def get_inputs():
    # Targets near the predictions, with a random error scale per row, as in a regression: over millions of
    # independent values the mean of squared differences is otherwise nearly one constant for every seed, and a
    # kernel could ignore the targets (or return a stored number) and still pass.
    predictions = torch.randn(BATCH, DIM)
    return [predictions, predictions + torch.rand(BATCH, 1) * torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
