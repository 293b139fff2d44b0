"""Batched matrix multiply: (B, M, K) @ (B, K, N) -> (B, M, N) (torch.bmm; e.g. per-head attention products)."""

import torch
import torch.nn as nn

BATCH = 8
M = 512
K = 256
N = 512

# Natively the sizes above are the benchmark shape; under Triton's interpreter (CPU) the evaluator uses these.
INTERPRETER_SHAPE = {"BATCH": 4, "M": 256, "K": 128, "N": 256}
SHAPES = [{"BATCH": 3, "M": 67, "K": 33, "N": 17}, {"BATCH": 1, "M": 1, "K": 129, "N": 65}]
# Both operands are inputs, so the evaluator's second distribution (N(0, 1) * 4 for each) gives products of
# magnitude ~16 summed K times: fp32 rounding in any summation order then differs from PyTorch's by ~1e-4 in absolute
# terms even where the result is near zero. The absolute tolerance allows for that; the relative one stays 1e-4.
TOLERANCE = {"atol": 1e-3, "rtol": 1e-4}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.bmm(a, b)


def get_inputs():
    return [torch.randn(BATCH, M, K), torch.randn(BATCH, K, N)]


def get_init_inputs():
    return []
