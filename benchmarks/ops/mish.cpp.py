"""Native seed for ops/mish: x * tanh(softplus(x)) in one vectorised pass, with one exp per element:
for n = exp(x), tanh(log(1 + n)) = n (n + 2) / (n (n + 2) + 2); above x = 20 (PyTorch's softplus threshold) the
result is x itself to fp32 precision, so the exp's argument is clamped there and never overflows."""

import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <math.h>
#include <stdint.h>
#define BLOCK 4096
void mish(const float* restrict x, float* restrict out, int64_t n) {
    int64_t blocks = (n + BLOCK - 1) / BLOCK;
    #pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < blocks; ++b) {
        int64_t end = (b + 1) * BLOCK < n ? (b + 1) * BLOCK : n;
        #pragma omp simd
        for (int64_t i = b * BLOCK; i < end; ++i) {
            float v = x[i], n = expf(v < 20.0f ? v : 20.0f), p = n * (n + 2.0f);
            out[i] = v > 20.0f ? v : v * p / (p + 2.0f);
        }
    }
}
"""
lib = load_c("mish", SOURCE, functions=["mish"], flags=["-O3", "-march=native", "-fopenmp", "-ffast-math"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.mish(x, out, x.numel())
        return out
