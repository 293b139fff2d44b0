"""Native seed for ops/silu: x / (1 + exp(-x)) in one vectorised pass (libmvec's vector expf under
-ffast-math)."""

import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <math.h>
#include <stdint.h>
#define BLOCK 4096
void silu(const float* restrict x, float* restrict out, int64_t n) {
    int64_t blocks = (n + BLOCK - 1) / BLOCK;
    #pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < blocks; ++b) {
        int64_t end = (b + 1) * BLOCK < n ? (b + 1) * BLOCK : n;
        #pragma omp simd
        for (int64_t i = b * BLOCK; i < end; ++i) {
            out[i] = x[i] / (1.0f + expf(-x[i]));
        }
    }
}
"""
lib = load_c("silu", SOURCE, functions=["silu"], flags=["-O3", "-march=native", "-fopenmp", "-ffast-math"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.silu(x, out, x.numel())
        return out
