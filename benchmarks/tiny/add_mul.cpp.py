"""Native seed for tiny/add_mul: (x + y) * y - x fused into one vectorised pass (eager PyTorch makes three)."""

import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <stdint.h>
#define BLOCK 4096
void add_mul(const float* restrict x, const float* restrict y, float* restrict out, int64_t n) {
    int64_t blocks = (n + BLOCK - 1) / BLOCK;
    #pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < blocks; ++b) {
        int64_t end = (b + 1) * BLOCK < n ? (b + 1) * BLOCK : n;
        #pragma omp simd
        for (int64_t i = b * BLOCK; i < end; ++i) out[i] = (x[i] + y[i]) * y[i] - x[i];
    }
}
"""
lib = load_c("add_mul", SOURCE, functions=["add_mul"], flags=["-O3", "-march=native", "-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x, y = x.contiguous(), y.contiguous()
        out = torch.empty_like(x)
        lib.add_mul(x, y, out, x.numel())
        return out
