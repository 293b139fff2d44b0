"""Native seed for tiny/row_sum: one row per iteration of the OpenMP loop, each row summed by a vectorised loop
with UNROLL independent vector accumulators (so the adds of one row overlap)."""

import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <stdint.h>
#define UNROLL 4
#define LANES 16
void row_sum(const float* restrict x, float* restrict out, int64_t rows, int64_t cols) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* restrict row = x + r * cols;
        float acc[UNROLL * LANES] = {0};
        int64_t main = cols - cols % (UNROLL * LANES), i = 0;
        for (; i < main; i += UNROLL * LANES) {
            #pragma omp simd
            for (int j = 0; j < UNROLL * LANES; ++j) acc[j] += row[i + j];
        }
        float total = 0.0f;
        for (; i < cols; ++i) total += row[i];
        #pragma omp simd reduction(+:total)
        for (int j = 0; j < UNROLL * LANES; ++j) total += acc[j];
        out[r] = total;
    }
}
"""
lib = load_c("row_sum", SOURCE, functions=["row_sum"], flags=["-O3", "-march=native", "-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        cols = x.shape[-1]
        out = torch.empty(x.shape[:-1], dtype=x.dtype)
        lib.row_sum(x, out, x.numel() // cols, cols)
        return out
