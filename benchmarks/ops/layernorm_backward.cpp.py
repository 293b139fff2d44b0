"""Native seed for ops/layernorm_backward: per row, mean and rstd (two passes), then the sums of
g = dy * weight and of g * xhat, then dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), all while the row is in
cache."""

import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <math.h>
#include <stdint.h>
#define CHUNK 16

void layernorm_backward(const float* restrict dy, const float* restrict x, const float* restrict w,
                        float* restrict dx, int64_t rows, int64_t cols, double eps) {
    #pragma omp parallel for schedule(dynamic, CHUNK)
    for (int64_t r = 0; r < rows; ++r) {
        const float* restrict row = x + r * cols;
        const float* restrict g = dy + r * cols;
        float* restrict dst = dx + r * cols;
        float sum = 0.0f, sq = 0.0f, sg = 0.0f, sgx = 0.0f;
        #pragma omp simd reduction(+:sum)
        for (int64_t i = 0; i < cols; ++i) sum += row[i];
        float mean = sum / (float)cols;
        #pragma omp simd reduction(+:sq)
        for (int64_t i = 0; i < cols; ++i) { float d = row[i] - mean; sq += d * d; }
        float rstd = 1.0f / sqrtf(sq / (float)cols + (float)eps);
        #pragma omp simd reduction(+:sg, sgx)
        for (int64_t i = 0; i < cols; ++i) {
            float gw = g[i] * w[i];
            sg += gw;
            sgx += gw * (row[i] - mean) * rstd;
        }
        float mg = sg / (float)cols, mgx = sgx / (float)cols;
        #pragma omp simd
        for (int64_t i = 0; i < cols; ++i) dst[i] = rstd * (g[i] * w[i] - mg - (row[i] - mean) * rstd * mgx);
    }
}
"""
lib = load_c("layernorm_backward", SOURCE, functions=["layernorm_backward"], flags=["-O3", "-march=native", "-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.dim = dim
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(dim))

    def forward(self, grad_output: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        dy, x = grad_output.contiguous(), x.contiguous()
        dx = torch.empty_like(x)
        lib.layernorm_backward(dy, x, self.weight.detach().contiguous(), dx, x.numel() // self.dim, self.dim,
                               self.eps)
        return dx
