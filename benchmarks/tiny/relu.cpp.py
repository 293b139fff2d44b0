"""Native seed for tiny/relu: one pass over the flattened tensor, BLOCK elements per OpenMP work item, each block a
loop the compiler vectorises (max with 0)."""

import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <stdint.h>
#define BLOCK 4096
void relu(const float* restrict x, float* restrict out, int64_t n) {
    int64_t blocks = (n + BLOCK - 1) / BLOCK;
    #pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < blocks; ++b) {
        int64_t end = (b + 1) * BLOCK < n ? (b + 1) * BLOCK : n;
        #pragma omp simd
        for (int64_t i = b * BLOCK; i < end; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
    }
}
"""
lib = load_c("relu", SOURCE, functions=["relu"], flags=["-O3", "-march=native", "-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.relu(x, out, x.numel())
        return out
