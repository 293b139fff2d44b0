"""Native seed for ops/huber_loss: mean(0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta)) in one
pass; each thread sums its BLOCK-element blocks (vector lanes as separate partial sums) into a double. The branch
becomes a vector select only with -fno-trapping-math (otherwise gcc keeps the loop scalar): measured 2026-11-25 on an
AMD EPYC Zen 3 (AVX2, 2 cores), 0.10x -> 2.02x over eager (scripts/bench_native.py)."""

import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <math.h>
#include <stdint.h>
#define BLOCK 4096
void huber_loss(const float* restrict p, const float* restrict t, float* restrict out, int64_t n, float delta) {
    int64_t blocks = (n + BLOCK - 1) / BLOCK;
    double total = 0.0;
    #pragma omp parallel for schedule(static) reduction(+:total)
    for (int64_t b = 0; b < blocks; ++b) {
        int64_t end = (b + 1) * BLOCK < n ? (b + 1) * BLOCK : n;
        float acc = 0.0f;
        #pragma omp simd reduction(+:acc)
        for (int64_t i = b * BLOCK; i < end; ++i) {
            float d = fabsf(p[i] - t[i]);
            acc += d < delta ? 0.5f * d * d : delta * (d - 0.5f * delta);
        }
        total += acc;
    }
    out[0] = (float)(total / (double)n);
}
"""
lib = load_c("huber_loss", SOURCE, functions=["huber_loss"],
           flags=["-O3", "-march=native", "-fopenmp", "-fno-trapping-math"])


class ModelNew(nn.Module):
    def __init__(self, delta: float = 1.0):
        super().__init__()
        self.delta = delta

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        predictions, targets = predictions.contiguous(), targets.contiguous()
        out = torch.empty((), dtype=predictions.dtype)
        lib.huber_loss(predictions, targets, out, predictions.numel(), self.delta)
        return out
