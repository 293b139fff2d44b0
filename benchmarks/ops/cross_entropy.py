"""Cross-entropy of logits against integer class targets, averaged over the batch (F.cross_entropy; a classifier
or LM head's loss). logits are (batch, classes) fp32, targets (batch,) int64; the output is a 0-d scalar."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 992
CLASSES = 8192

# Natively the sizes above are the benchmark shape; under Triton's interpreter (CPU) the evaluator uses these.
INTERPRETER_SHAPE = {"BATCH": 64}
SHAPES = [{"BATCH": 67, "CLASSES": 1000}, {"BATCH": 3, "CLASSES": 4099}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, targets)


def get_inputs():
    return [torch.randn(BATCH, CLASSES) * 2.0, torch.randint(0, CLASSES, (BATCH,))]


def get_init_inputs():
    return []
