"""Native seed for ops/log_softmax: per row, the max, then the sum of exp(x - max) (libmvec's vector expf
under -ffast-math), then x - max - log(sum), all while the row is in cache."""

import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <math.h>
#include <stdint.h>
#define CHUNK 16

void log_softmax(const float* restrict x, float* restrict out, int64_t rows, int64_t cols) {
    #pragma omp parallel for schedule(dynamic, CHUNK)
    for (int64_t r = 0; r < rows; ++r) {
        const float* restrict row = x + r * cols;
        float* restrict dst = out + r * cols;
        float mx = -INFINITY, sum = 0.0f;
        #pragma omp simd reduction(max:mx)
        for (int64_t i = 0; i < cols; ++i) mx = row[i] > mx ? row[i] : mx;
        #pragma omp simd reduction(+:sum)
        for (int64_t i = 0; i < cols; ++i) sum += expf(row[i] - mx);
        float shift = mx + logf(sum);
        #pragma omp simd
        for (int64_t i = 0; i < cols; ++i) dst[i] = row[i] - shift;
    }
}
"""
lib = load_c(
    "log_softmax", SOURCE, functions=["log_softmax"],
    flags=["-O3", "-march=native", "-fopenmp", "-ffast-math"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        cols = x.shape[-1]
        out = torch.empty_like(x)
        lib.log_softmax(x, out, x.numel() // cols, cols)
        return out
