"""Native seed for ops/col_sum: each OpenMP thread sums a contiguous band of rows into its own column
accumulators (double, vectorised across the columns, BLOCK columns at a time so they stay in L1), then the bands'
partial sums are added in thread order."""

import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <stdint.h>
#include <stdlib.h>
#include <omp.h>
#define BLOCK 256
void col_sum(const float* restrict x, float* restrict out, int64_t rows, int64_t cols) {
    int threads = omp_get_max_threads();
    double* partial = calloc((size_t)threads * cols, sizeof(double));
    #pragma omp parallel num_threads(threads)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        int64_t r0 = rows * t / nt, r1 = rows * (t + 1) / nt;
        double* restrict acc = partial + (int64_t)t * cols;
        for (int64_t c0 = 0; c0 < cols; c0 += BLOCK) {
            int64_t c1 = c0 + BLOCK < cols ? c0 + BLOCK : cols;
            for (int64_t r = r0; r < r1; ++r) {
                const float* restrict row = x + r * cols;
                #pragma omp simd
                for (int64_t c = c0; c < c1; ++c) acc[c] += row[c];
            }
        }
    }
    for (int64_t c = 0; c < cols; ++c) {
        double s = 0.0;
        for (int t = 0; t < threads; ++t) s += partial[(int64_t)t * cols + c];
        out[c] = (float)s;
    }
    free(partial);
}
"""
lib = load_c("col_sum", SOURCE, functions=["col_sum"], flags=["-O3", "-march=native", "-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty(x.shape[1:], dtype=x.dtype)
        lib.col_sum(x, out, x.shape[0], x[0].numel())
        return out
