"""Native seed for ops/row_mean: one row per OpenMP iteration, a vectorised sum divided by the row length."""

import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <math.h>
#include <stdint.h>
#define CHUNK 16

void row_mean(const float* restrict x, float* restrict out, int64_t rows, int64_t cols) {
    #pragma omp parallel for schedule(dynamic, CHUNK)
    for (int64_t r = 0; r < rows; ++r) {
        const float* restrict row = x + r * cols;
        float sum = 0.0f;
        #pragma omp simd reduction(+:sum)
        for (int64_t i = 0; i < cols; ++i) sum += row[i];
        out[r] = sum / (float)cols;
    }
}
"""
lib = load_c("row_mean", SOURCE, functions=["row_mean"], flags=["-O3", "-march=native", "-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        cols = x.shape[-1]
        out = torch.empty(x.shape[:-1], dtype=x.dtype)
        lib.row_mean(x, out, x.numel() // cols, cols)
        return out
