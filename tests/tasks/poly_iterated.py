"""An affine step iterated 400 times: eager PyTorch runs 800 operators a call, each a pass over 256 KiB that stays in
the caches, so its call is the dispatcher's and the profiler's per-operator cost; a fused native kernel keeps every
element in a register through all the steps. The reference's watch records 800 operators a call: what releasing that
record costs must stay outside the driver's window around the next call (`worker/timed_calls.py`), or it widens the
reference's remainder beyond its timer's figure, which the driver compares with the candidate's
(`clock_checks.call_gap`)."""
import torch
import torch.nn as nn

N = 65536
STEPS = 400

SHAPES = [{"N": 1001}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(STEPS):
            x = x * 0.999 + 0.001
        return x


def get_inputs():
    return [torch.randn(N)]


def get_init_inputs():
    return []
