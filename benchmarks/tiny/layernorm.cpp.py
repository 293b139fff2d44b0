"""Native seed for tiny/layernorm: one row per OpenMP iteration; mean, then the variance of (x - mean) (two passes
over the row while it is in cache, as exact as PyTorch's Welford), then (x - mean) * rstd * weight + bias."""

import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <math.h>
#include <stdint.h>
#define CHUNK 16
void layernorm(const float* restrict x, const float* restrict w, const float* restrict b, float* restrict out,
               int64_t rows, int64_t cols, double eps) {
    #pragma omp parallel for schedule(dynamic, CHUNK)
    for (int64_t r = 0; r < rows; ++r) {
        const float* restrict row = x + r * cols;
        float* restrict dst = out + r * cols;
        float sum = 0.0f;
        #pragma omp simd reduction(+:sum)
        for (int64_t i = 0; i < cols; ++i) sum += row[i];
        float mean = sum / (float)cols, sq = 0.0f;
        #pragma omp simd reduction(+:sq)
        for (int64_t i = 0; i < cols; ++i) { float d = row[i] - mean; sq += d * d; }
        float rstd = 1.0f / sqrtf(sq / (float)cols + (float)eps);
        #pragma omp simd
        for (int64_t i = 0; i < cols; ++i) dst[i] = (row[i] - mean) * rstd * w[i] + b[i];
    }
}
"""
lib = load_c("layernorm", SOURCE, functions=["layernorm"], flags=["-O3", "-march=native", "-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.dim = dim
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(dim))
        self.bias = nn.Parameter(0.1 * torch.randn(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.layernorm(x, self.weight.contiguous(), self.bias.contiguous(), out, x.numel() // self.dim, self.dim,
                      self.eps)
        return out
