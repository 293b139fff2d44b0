"""Native seed for tiny/rmsnorm: one row per OpenMP iteration; the mean of squares in one vectorised pass, then
x * rsqrt(ms + eps) * weight in a second while the row is in cache."""

import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <math.h>
#include <stdint.h>
#define CHUNK 16
void rmsnorm(const float* restrict x, const float* restrict w, float* restrict out, int64_t rows, int64_t cols,
             double eps) {
    #pragma omp parallel for schedule(dynamic, CHUNK)
    for (int64_t r = 0; r < rows; ++r) {
        const float* restrict row = x + r * cols;
        float* restrict dst = out + r * cols;
        float sq = 0.0f;
        #pragma omp simd reduction(+:sq)
        for (int64_t i = 0; i < cols; ++i) sq += row[i] * row[i];
        float scale = 1.0f / sqrtf(sq / (float)cols + (float)eps);
        #pragma omp simd
        for (int64_t i = 0; i < cols; ++i) dst[i] = row[i] * scale * w[i];
    }
}
"""
lib = load_c("rmsnorm", SOURCE, functions=["rmsnorm"], flags=["-O3", "-march=native", "-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        dim = self.weight.shape[0]
        out = torch.empty_like(x)
        lib.rmsnorm(x, self.weight.contiguous(), out, x.numel() // dim, dim, self.eps)
        return out
