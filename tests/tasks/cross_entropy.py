"""Cross-entropy of logits against class indices, averaged over the batch (a loss with a final mean)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 64
classes = 200

SHAPES = [{"batch_size": 9, "classes": 37}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, target)


def get_inputs():
    return [torch.randn(batch_size, classes), torch.randint(0, classes, (batch_size,))]


def get_init_inputs():
    return []
