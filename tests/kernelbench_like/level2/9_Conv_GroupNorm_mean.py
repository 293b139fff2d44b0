import torch
import torch.nn as nn


class Model(nn.Module):
    """Degenerate on purpose: the mean over channels and space after a GroupNorm is ~0 for every input."""

    def __init__(self, in_channels: int, out_channels: int, groups: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3)
        self.norm = nn.GroupNorm(groups, out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.conv(x)).mean(dim=[1, 2, 3])


batch_size = 4
in_channels = 3
out_channels = 8
groups = 4
size = 12


def get_inputs():
    return [torch.rand(batch_size, in_channels, size, size)]


def get_init_inputs():
    return [in_channels, out_channels, groups]
