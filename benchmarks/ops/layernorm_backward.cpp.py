"""Native seed for ops/layernorm_backward: per row, one pass that reads x and dy together for every sum the
gradient needs, then dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * weight while both rows are in
cache.

The sums are taken about the row's first value (shift s: sum(x - s), sum((x - s)^2), sum(g), sum(g * (x - s))), so a
row far from zero keeps its precision, and the mean, the variance and sum(g * xhat) follow from them. One pass over
both inputs instead of a pass over x alone, a second over x (in cache) and a third that first brought dy in: on a
2-CPU Intel Xeon VM (2026-11-25) 67% of the copy bandwidth's bound with the three passes, where each core streamed
one array at a time.

NaN and inf, since 2026-11-28: a NaN or inf in a row of x makes that row of dx all NaN (the variance's clamp at 0 keeps
a NaN; it made the variance 0 and dx a mix of inf and NaN), and a row whose dy holds one takes a scalar path with
PyTorch's own formula (a dy w + b x + c, sums about 0), so that its NaNs and infs fall where PyTorch's do: all NaN, or
for some signs of x, b and c a mix.
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
        const float v = sdd / n - md * md, var = v < 0.0f ? 0.0f : v;  /* an inf or NaN in x: NaN, so dx is NaN */
        const float rstd = 1.0f / sqrtf(var + (float)eps), mean = s + md;
        if (!isfinite(sg) || !isfinite(sgd)) {
            /* an inf or NaN in dy (x finite): PyTorch's own formula, dx = a dy w + b x + c with its sums about 0, whose
               infs and NaNs (which depend on the signs of x, b and c) this rare path reproduces */
            float ds = 0.0f, db = 0.0f;
            for (int64_t i = 0; i < cols; ++i) { ds += g[i] * row[i] * w[i]; db += g[i] * w[i]; }
            const float b = (db * mean - ds) * rstd * rstd * rstd / n, c = -b * mean - db * rstd / n;
            for (int64_t i = 0; i < cols; ++i) dst[i] = rstd * g[i] * w[i] + b * row[i] + c;
            continue;
        }
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
