"""Huber (smooth L1) loss between predictions and targets, delta = 1, mean over all elements (F.huber_loss; a
robust regression loss, as in detection box regression and DQN). The output is a 0-d scalar."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 7936
DIM = 1024

# Natively the sizes above are the benchmark shape; under Triton's interpreter (CPU) the evaluator uses these.
INTERPRETER_SHAPE = {"BATCH": 256}
SHAPES = [{"BATCH": 67, "DIM": 1000}, {"BATCH": 1, "DIM": 7}]


class Model(nn.Module):
    def __init__(self, delta: float = 1.0):
        super().__init__()
        self.delta = delta

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.huber_loss(predictions, targets, delta=self.delta)


def get_inputs():
    return [torch.randn(BATCH, DIM) * 2.0, torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
