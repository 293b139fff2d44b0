"""Native seed for tiny/mse_loss: mean((p - t)^2) in one pass; each thread sums its BLOCK-element blocks in double
(vector lanes as separate partial sums), the partial sums are added in a fixed order, then divided by n."""

import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <stdint.h>
#define BLOCK 4096
double mse_sum(const float* restrict p, const float* restrict t, int64_t n) {
    int64_t blocks = (n + BLOCK - 1) / BLOCK;
    double total = 0.0;
    #pragma omp parallel for schedule(static) reduction(+:total)
    for (int64_t b = 0; b < blocks; ++b) {
        int64_t end = (b + 1) * BLOCK < n ? (b + 1) * BLOCK : n;
        float acc = 0.0f;
        #pragma omp simd reduction(+:acc)
        for (int64_t i = b * BLOCK; i < end; ++i) { float d = p[i] - t[i]; acc += d * d; }
        total += acc;
    }
    return total;
}
void mse_loss(const float* restrict p, const float* restrict t, float* restrict out, int64_t n) {
    out[0] = (float)(mse_sum(p, t, n) / (double)n);
}
"""
lib = load_c("mse_loss", SOURCE, functions=["mse_loss"], flags=["-O3", "-march=native", "-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        predictions, targets = predictions.contiguous(), targets.contiguous()
        out = torch.empty((), dtype=predictions.dtype)
        lib.mse_loss(predictions, targets, out, predictions.numel())
        return out
