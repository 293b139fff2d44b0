"""Residual add fused with RMS normalisation (a LLaMA decoder layer's pre-norm on its residual stream):
h = x + residual; out = h / sqrt(mean(h^2) + eps) * weight over the last dimension.

The weight starts away from ones, so a candidate that ignores it is caught. Only `out` is returned: every output of
a task must depend on every input and on the weights (`opforge task check`), and h alone would not use the weight.
"""

import torch
import torch.nn as nn

TOKENS = 1984
DIM = 4096

# Natively the sizes above are the benchmark shape; under Triton's interpreter (CPU) the evaluator uses these.
INTERPRETER_SHAPE = {"TOKENS": 128}
SHAPES = [{"TOKENS": 67, "DIM": 1000}, {"TOKENS": 3, "DIM": 4099}]


class Model(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(dim))

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        h = x + residual
        return h * torch.rsqrt(h.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight


def get_inputs():
    return [torch.randn(TOKENS, DIM), torch.randn(TOKENS, DIM) * 2.0]


def get_init_inputs():
    return [DIM]
