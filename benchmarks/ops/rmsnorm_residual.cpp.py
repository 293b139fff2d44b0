"""Native seed for ops/rmsnorm_residual: per row, h = x + residual written to the output while the
sum of squares accumulates, then scaled in place by rsqrt(mean + eps) * weight while the row is in cache."""

import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <math.h>
#include <stdint.h>
#define CHUNK 16

void rmsnorm_residual(const float* restrict x, const float* restrict res, const float* restrict w,
                      float* restrict out, int64_t rows, int64_t cols, double eps) {
    #pragma omp parallel for schedule(dynamic, CHUNK)
    for (int64_t r = 0; r < rows; ++r) {
        const float* restrict a = x + r * cols;
        const float* restrict b = res + r * cols;
        float* restrict dst = out + r * cols;
        float sq = 0.0f;
        #pragma omp simd reduction(+:sq)
        for (int64_t i = 0; i < cols; ++i) { float h = a[i] + b[i]; dst[i] = h; sq += h * h; }
        float scale = 1.0f / sqrtf(sq / (float)cols + (float)eps);
        #pragma omp simd
        for (int64_t i = 0; i < cols; ++i) dst[i] = dst[i] * scale * w[i];
    }
}
"""
lib = load_c("rmsnorm_residual", SOURCE, functions=["rmsnorm_residual"], flags=["-O3", "-march=native", "-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(dim))

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        x, residual = x.contiguous(), residual.contiguous()
        dim = self.weight.shape[0]
        out = torch.empty_like(x)
        lib.rmsnorm_residual(x, residual, self.weight.contiguous(), out, x.numel() // dim, dim, self.eps)
        return out
