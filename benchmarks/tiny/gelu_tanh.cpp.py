"""Native seed for tiny/gelu_tanh: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) in one vectorised pass.

tanh is written with exp of a non-positive argument (tanh|u| = (1 - e) / (1 + e), e = exp(-2|u|)), which never
overflows; -ffast-math lets the compiler call the vector expf of glibc's libmvec inside the SIMD loop.
"""

import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <math.h>
#include <stdint.h>
#define BLOCK 4096
void gelu_tanh(const float* restrict x, float* restrict out, int64_t n) {
    int64_t blocks = (n + BLOCK - 1) / BLOCK;
    #pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < blocks; ++b) {
        int64_t end = (b + 1) * BLOCK < n ? (b + 1) * BLOCK : n;
        #pragma omp simd
        for (int64_t i = b * BLOCK; i < end; ++i) {
            float v = x[i];
            float inner = 0.7978845608028654f * (v + 0.044715f * v * v * v);
            float e = expf(-2.0f * fabsf(inner));
            float t = (1.0f - e) / (1.0f + e);
            t = inner >= 0.0f ? t : -t;
            out[i] = 0.5f * v * (1.0f + t);
        }
    }
}
"""
lib = load_c("gelu_tanh", SOURCE, functions=["gelu_tanh"], flags=["-O3", "-march=native", "-fopenmp", "-ffast-math"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.gelu_tanh(x, out, x.numel())
        return out
