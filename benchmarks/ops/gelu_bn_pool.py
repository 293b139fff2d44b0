"""A pooled feature score: the mean over features of gelu(batch_norm(gelu(x))), the batch norm in training mode
(each feature normalised by its statistics over the batch, no affine). x of shape (rows, features).

The statistics need every row's gelu(x) before any output: a kernel either keeps that intermediate (the size of the
input) for its second pass or computes it again, so the fastest kernel is not the leanest (the built-in task whose
speed and memory objectives disagree; its native seed's BLOCK_STORED sets how many features are kept)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

ROWS = 2048
FEATURES = 1024

# Natively the sizes above are the benchmark shape; under Triton's interpreter (CPU) the evaluator uses these.
INTERPRETER_SHAPE = {"ROWS": 64, "FEATURES": 96}
SHAPES = [{"ROWS": 37, "FEATURES": 53}, {"ROWS": 3, "FEATURES": 130}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.batch_norm(F.gelu(x), None, None, training=True, eps=1e-5)
        return F.gelu(h).mean(dim=-1)


def get_inputs():
    return [torch.randn(ROWS, FEATURES)]


def get_init_inputs():
    return []
