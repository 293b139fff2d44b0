"""A sequence classifier (KernelBench level 3's LSTM layout): a two-layer nn.LSTM over (batch, seq, features) and a
linear head on the last step's hidden state. opforge has no seed kernel for an LSTM, so `opforge model extract`
writes its task for an LLM run to optimise."""

import torch
import torch.nn as nn

BATCH = 8
SEQ = 64
INPUT = 128
HIDDEN = 256
LAYERS = 2
CLASSES = 10


class Model(nn.Module):
    def __init__(self, input_size: int, hidden_size: int, layers: int, classes: int):
        super().__init__()
        self.lstm = nn.LSTM(input_size, hidden_size, layers, batch_first=True)
        self.fc = nn.Linear(hidden_size, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(x)
        return self.fc(out[:, -1, :])


def get_inputs():
    return [torch.randn(BATCH, SEQ, INPUT)]


def get_init_inputs():
    return [INPUT, HIDDEN, LAYERS, CLASSES]
