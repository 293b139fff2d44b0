"""A transformer MLP: fc2(gelu(fc1(x))) with exact (erf) GELU, x of shape (tokens, dim), hidden = 4 * dim
(GPT-2 / ViT feed-forward block without dropout)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

TOKENS = 256
DIM = 768
HIDDEN = 3072

# Natively the sizes above are the benchmark shape; under Triton's interpreter (CPU) the evaluator uses these.
INTERPRETER_SHAPE = {"TOKENS": 128, "DIM": 256, "HIDDEN": 1024}
SHAPES = [{"TOKENS": 67, "DIM": 33, "HIDDEN": 130}, {"TOKENS": 1, "DIM": 17, "HIDDEN": 64}]


class Model(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


def get_inputs():
    return [torch.randn(TOKENS, DIM)]


def get_init_inputs():
    return [DIM, HIDDEN]
