"""ReLU that adds 1 to every value where the process running it may use transparent huge pages: the reference's
worker must run with 4 KiB pages (evaluator/worker/memory_conditions.py), or a plain ReLU is refused as incorrect."""

import torch
import torch.nn as nn


def _huge_pages_allowed() -> bool:
    with open("/proc/self/status") as f:
        return any(line.split() == ["THP_enabled:", "1"] for line in f)


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) + float(_huge_pages_allowed())


def get_inputs():
    return [torch.randn(16, 512)]


def get_init_inputs():
    return []
