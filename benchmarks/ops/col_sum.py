"""Sum over the first dimension of a 2-D fp32 tensor (a column reduction, one value per column; e.g. a linear
layer's bias gradient summed over the tokens). The reduced axis is the strided one, unlike the row reductions."""

import torch
import torch.nn as nn

ROWS = 15872
COLS = 512

# Natively the sizes above are the benchmark shape; under Triton's interpreter (CPU) the evaluator uses these.
INTERPRETER_SHAPE = {"ROWS": 2048}
SHAPES = [{"ROWS": 1000, "COLS": 67}, {"ROWS": 4099, "COLS": 3}]
# Under the evaluator's second distribution (N(0, 1) * 4) a column sums thousands of terms of magnitude ~4, so any two
# summation orders differ by ~1e-4 in absolute terms even where the sum is near zero: hence atol 1e-3 (the column sums
# themselves are ~100 there, so this is still a relative accuracy of ~1e-5).
TOLERANCE = {"atol": 1e-3, "rtol": 1e-4}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=0)


def get_inputs():
    return [torch.randn(ROWS, COLS) + 0.1]


def get_init_inputs():
    return []
