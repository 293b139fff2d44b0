"""Native seed for ops/cross_entropy: per row, the max and the sum of exp(x - max) (libmvec's vector expf
under -ffast-math), so loss = max + log(sum) - x[target]; the rows' losses are summed in double and divided by the
batch size."""

import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <math.h>
#include <stdint.h>
#define CHUNK 16

void cross_entropy(const float* restrict x, const int64_t* restrict target, float* restrict out, int64_t rows,
                   int64_t cols) {
    double total = 0.0;
    #pragma omp parallel for schedule(dynamic, CHUNK) reduction(+:total)
    for (int64_t r = 0; r < rows; ++r) {
        const float* restrict row = x + r * cols;
        float mx = -INFINITY, sum = 0.0f;
        #pragma omp simd reduction(max:mx)
        for (int64_t i = 0; i < cols; ++i) mx = row[i] > mx ? row[i] : mx;
        #pragma omp simd reduction(+:sum)
        for (int64_t i = 0; i < cols; ++i) sum += expf(row[i] - mx);
        total += (double)(mx + logf(sum) - row[target[r]]);
    }
    out[0] = (float)(total / (double)rows);
}
"""
lib = load_c(
    "cross_entropy", SOURCE, functions=["cross_entropy"],
    flags=["-O3", "-march=native", "-fopenmp", "-ffast-math"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logits, targets = logits.contiguous(), targets.contiguous()
        out = torch.empty((), dtype=logits.dtype)
        lib.cross_entropy(logits, targets, out, logits.shape[0], logits.shape[1])
        return out
