"""ReLU whose benchmark shape is native-sized, with a small INTERPRETER_SHAPE for Triton's interpreter on a CPU."""
import torch
import torch.nn as nn

ROWS = 512
COLS = 2048

INTERPRETER_SHAPE = {"ROWS": 4, "COLS": 96}
SHAPES = [{"COLS": 7}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []
