"""Native seed for tiny/softmax: one row per OpenMP iteration, three vectorised passes over the row while it is in
L1/L2 (max; exp(x - max) stored and summed; scale by 1/sum). -ffast-math lets the compiler use libmvec's vector
expf."""

import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <math.h>
#include <stdint.h>
#define CHUNK 16
void softmax(const float* restrict x, float* restrict out, int64_t rows, int64_t cols) {
    #pragma omp parallel for schedule(dynamic, CHUNK)
    for (int64_t r = 0; r < rows; ++r) {
        const float* restrict row = x + r * cols;
        float* restrict dst = out + r * cols;
        float mx = -INFINITY;
        #pragma omp simd reduction(max:mx)
        for (int64_t i = 0; i < cols; ++i) mx = row[i] > mx ? row[i] : mx;
        float sum = 0.0f;
        #pragma omp simd reduction(+:sum)
        for (int64_t i = 0; i < cols; ++i) { float e = expf(row[i] - mx); dst[i] = e; sum += e; }
        float inv = 1.0f / sum;
        #pragma omp simd
        for (int64_t i = 0; i < cols; ++i) dst[i] *= inv;
    }
}
"""
lib = load_c("softmax", SOURCE, functions=["softmax"], flags=["-O3", "-march=native", "-fopenmp", "-ffast-math"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        cols = x.shape[-1]
        out = torch.empty_like(x)
        lib.softmax(x, out, x.numel() // cols, cols)
        return out
