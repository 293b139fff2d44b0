# task: relu
# expect: rejected
# beside: true
# why: a plain PyTorch rewrite with no custom kernel at all (clamp_min instead of relu, so it does not look like the
#   reference); only admissible when allow_torch is set.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.clamp_min(x, 0.0)
