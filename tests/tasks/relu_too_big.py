"""KernelBench level 1's 19_ReLU at eight times its batch: 4096 x 8 x 393216 floats, 48 GiB a call. Sized on the meta
device when it loads, it is refused before anything is drawn (evaluator/worker/task_size.py)."""
import torch
import torch.nn as nn

BATCH = 4096 * 8
DIM = 393216


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
