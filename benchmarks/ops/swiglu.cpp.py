"""Native seed for ops/swiglu: silu(gate) * up read straight from the two halves of each row of the fused
(tokens, 2 * hidden) input, one vectorised pass per row (no chunk copies)."""

import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <math.h>
#include <stdint.h>
#define CHUNK 16
void swiglu(const float* restrict x, float* restrict out, int64_t rows, int64_t hidden) {
    #pragma omp parallel for schedule(static, CHUNK)
    for (int64_t r = 0; r < rows; ++r) {
        const float* restrict gate = x + r * 2 * hidden;
        const float* restrict up = gate + hidden;
        float* restrict dst = out + r * hidden;
        #pragma omp simd
        for (int64_t i = 0; i < hidden; ++i) dst[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
    }
}
"""
lib = load_c("swiglu", SOURCE, functions=["swiglu"], flags=["-O3", "-march=native", "-fopenmp", "-ffast-math"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        hidden = x.shape[-1] // 2
        out = torch.empty((*x.shape[:-1], hidden), dtype=x.dtype)
        lib.swiglu(x, out, x.numel() // x.shape[-1], hidden)
        return out
