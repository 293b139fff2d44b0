# task: ordered_weighted_average
# expect: rejected
# beside: true
# why: a native kernel copies the input, and PyTorch sorts, weights and sums the copy: the reference recomputed by
#   PyTorch on a kernel's output (all of the reference's reads), with a kernel launched to look like one
import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <stdint.h>
void copy(const float* x, float* out, int64_t n) { for (int64_t i = 0; i < n; ++i) out[i] = x[i]; }
"""
lib = load_c("owa_copy", SOURCE, functions=["copy"], flags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self, cols: int):
        super().__init__()
        ranks = torch.arange(cols, dtype=torch.float32)
        self.register_buffer("weights", torch.softmax(-((ranks - cols / 2) ** 2) / cols, dim=0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        c = torch.empty_like(x)
        lib.copy(x, c, x.numel())
        return (torch.sort(c, dim=-1).values * self.weights).sum(dim=-1)
