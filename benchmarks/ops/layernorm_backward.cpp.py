"""Native seed for ops/layernorm_backward: per row, one pass that reads x and dy together for every sum the
gradient needs, then dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * weight while both rows are in
cache.

The sums are taken about the row's first value (shift s: sum(x - s), sum((x - s)^2), sum(g), sum(g * (x - s))), so a
row far from zero keeps its precision, and the mean, the variance and sum(g * xhat) follow from them. One pass over
both inputs instead of a pass over x alone, a second over x (in cache) and a third that first brought dy in: on a
2-CPU Intel Xeon VM (2026-11-25) 67% of the copy bandwidth's bound with the three passes, where each core streamed
one array at a time.
"""

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
        const float s = row[0];
        float sd = 0.0f, sdd = 0.0f, sg = 0.0f, sgd = 0.0f;
        #pragma omp simd reduction(+:sd, sdd, sg, sgd)
        for (int64_t i = 0; i < cols; ++i) {
            float d = row[i] - s, gw = g[i] * w[i];
            sd += d;
            sdd += d * d;
            sg += gw;
            sgd += gw * d;
        }
        const float n = (float)cols, md = sd / n;  /* mean - s */
        const float var = fmaxf(sdd / n - md * md, 0.0f);
        const float rstd = 1.0f / sqrtf(var + (float)eps), mean = s + md;
        const float mg = sg / n, mgx = (sgd - md * sg) * rstd / n;  /* mean(g), mean(g * xhat) */
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
