"""Softmax's backward pass over the last dimension: given the saved logits x and the upstream gradient dy,
dx = y * (dy - sum(dy * y, dim=-1)) with y = softmax(x) (row-wise; what autograd runs for an attention softmax).

The softmax output is recomputed from the logits (as memory-saving implementations do) rather than taken as an
input: the evaluator also feeds every float input with N(0, 1) * 4 values, and for a "y" that is not a probability
vector the row dot product cancels so badly that no fp32 kernel could match to 1e-4. From logits, y is always a
distribution and the task stays well-conditioned.
"""

import torch
import torch.nn as nn

BATCH = 3968
DIM = 2048

# Natively the sizes above are the benchmark shape; under Triton's interpreter (CPU) the evaluator uses these.
INTERPRETER_SHAPE = {"BATCH": 256}
SHAPES = [{"BATCH": 67, "DIM": 1000}, {"BATCH": 3, "DIM": 4099}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, grad_output: torch.Tensor) -> torch.Tensor:
        y = torch.softmax(logits, dim=-1)
        return y * (grad_output - (grad_output * y).sum(dim=-1, keepdim=True))


def get_inputs():
    return [torch.randn(BATCH, DIM) * 2.0, torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
