"""SwiGLU gating of a fused gate/up projection: silu(x[:, :H]) * x[:, H:] (elementwise over two halves).

The input is what a LLaMA-style MLP's fused gate_up projection produces: one (tokens, 2 * hidden) tensor.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

TOKENS = 3968
HIDDEN = 1024

# Natively the sizes above are the benchmark shape; under Triton's interpreter (CPU) the evaluator uses these.
INTERPRETER_SHAPE = {"TOKENS": 256}
SHAPES = [{"TOKENS": 67, "HIDDEN": 500}, {"TOKENS": 3, "HIDDEN": 127}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = x.chunk(2, dim=-1)
        return F.silu(gate) * up


def get_inputs():
    return [torch.randn(TOKENS, 2 * HIDDEN) * 2.0]


def get_init_inputs():
    return []
