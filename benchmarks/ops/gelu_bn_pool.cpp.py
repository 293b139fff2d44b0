"""Native seed for ops/gelu_bn_pool: mean over features of gelu(batch_norm(gelu(x))) in two passes over x in one
parallel region. The first computes gelu(x) row by row and each thread's per-feature sums of it and of its square (in
double); the sums are combined into each feature's mean and 1/std; the second pass normalises gelu(x) again, applies
the outer GELU and averages each row.

The second pass needs gelu(x) a second time: BLOCK_STORED sets how many features of it the first pass keeps (a buffer
of rows x BLOCK_STORED floats allocated per call); the rest are computed again from x. Keeping all of it is the fastest
(two GELUs per element, the second pass reading the kept values), keeping none the leanest (three GELUs, no buffer):
the tunable trades speed for peak memory, and the search's Pareto front holds several of its values."""

import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <omp.h>
#define BLOCK_STORED 256  /* features of gelu(x) kept by the first pass for the second (the rest computed again) */

static inline float gelu(float v) { return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f)); }

int gelu_bn_pool(const float* restrict x, float* restrict out, int64_t rows, int64_t cols) {
    int64_t kept = cols < BLOCK_STORED ? cols : BLOCK_STORED;
    int threads = omp_get_max_threads();
    float* stored = kept > 0 ? (float*)malloc(sizeof(float) * (size_t)(rows * kept)) : NULL;
    double* partial = (double*)calloc((size_t)threads * 2 * (size_t)cols, sizeof(double));
    float* shift = (float*)malloc(sizeof(float) * 2 * (size_t)cols);  /* each feature's mean, then its 1/std */
    if ((kept > 0 && !stored) || !partial || !shift) {
        free(stored); free(partial); free(shift);
        return -1;
    }
    float* scale = shift + cols;
    #pragma omp parallel num_threads(threads)
    {
        double* s = partial + (size_t)omp_get_thread_num() * 2 * (size_t)cols;
        double* q = s + cols;
        #pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; ++r) {
            const float* xr = x + r * cols;
            float* gr = stored ? stored + r * kept : NULL;
            for (int64_t c = 0; c < kept; ++c) {
                float g = gelu(xr[c]);
                gr[c] = g;
                s[c] += g;
                q[c] += (double)g * g;
            }
            for (int64_t c = kept; c < cols; ++c) {
                float g = gelu(xr[c]);
                s[c] += g;
                q[c] += (double)g * g;
            }
        }
        #pragma omp for schedule(static)
        for (int64_t c = 0; c < cols; ++c) {
            double sum = 0.0, sq = 0.0;
            for (int t = 0; t < threads; ++t) {
                sum += partial[(size_t)t * 2 * (size_t)cols + (size_t)c];
                sq += partial[(size_t)t * 2 * (size_t)cols + (size_t)cols + (size_t)c];
            }
            double mean = sum / (double)rows, var = sq / (double)rows - mean * mean;
            shift[c] = (float)mean;
            scale[c] = (float)(1.0 / sqrt((var > 0.0 ? var : 0.0) + 1e-5));
        }
        #pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; ++r) {
            const float* xr = x + r * cols;
            const float* gr = stored ? stored + r * kept : NULL;
            float acc = 0.0f;
            for (int64_t c = 0; c < kept; ++c)
                acc += gelu((gr[c] - shift[c]) * scale[c]);
            for (int64_t c = kept; c < cols; ++c)
                acc += gelu((gelu(xr[c]) - shift[c]) * scale[c]);
            out[r] = acc / (float)cols;
        }
    }
    free(stored);
    free(partial);
    free(shift);
    return 0;
}
"""
lib = load_c("gelu_bn_pool", SOURCE, functions=["gelu_bn_pool"],
             flags=["-O3", "-march=native", "-fopenmp", "-ffast-math"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty(x.shape[0], dtype=x.dtype)
        if lib.gelu_bn_pool(x, out, x.shape[0], x.shape[1]) != 0:
            raise MemoryError("gelu_bn_pool: out of memory for its buffers")
        return out
