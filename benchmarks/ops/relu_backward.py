"""ReLU's backward pass: grad_input = grad_output where x > 0, else 0 (elementwise over the saved input x)."""

import torch
import torch.nn as nn

BATCH = 3968
DIM = 2048

# Natively the sizes above are the benchmark shape; under Triton's interpreter (CPU) the evaluator uses these.
INTERPRETER_SHAPE = {"BATCH": 256}
SHAPES = [{"BATCH": 67, "DIM": 1000}, {"BATCH": 1, "DIM": 127}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, grad_output: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return torch.where(x > 0, grad_output, torch.zeros_like(grad_output))


def get_inputs():
    return [torch.randn(BATCH, DIM), torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
