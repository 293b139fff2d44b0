"""Native seed for tiny/rmsnorm: one row per OpenMP iteration; the mean of squares in one vectorised pass, then
x * rsqrt(ms + eps) * weight in a second while the row is in cache, a large output by non-temporal stores (see
STREAM_FROM_BYTES). Since 2026-11-28 the portable path streams too, in AVX2 intrinsics where the CPU has them (a
plain-C loop elsewhere): it wrote through the cache, a read of each output line first (AMD EPYC Zen 4, x86-64-v3
build as a proxy for an AVX2 CPU, `scripts/bench_seed_ab.py --tasks rmsnorm --march x86-64-v3 --before HEAD
--budget-s 4`: 2.53 -> 1.90 ms, 1.34x paired (1.30x and 1.34x in two more runs), roofline 70% -> 93%, of copy 81% ->
108%; 101% in `scripts/bench_native.py --march x86-64-v3` at a 36.6 GB/s copy peak; the AVX-512 path unchanged, 0.98x
paired, 91%). Fetching the next row into L2 meanwhile, as the AVX-512 path of tiny/layernorm does, measured 0.92x, and
four accumulators for the sum of squares in place of the omp simd reduction 0.94x: neither is used."""

import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <math.h>
#include <stdint.h>
#define CHUNK 16
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif
/* An output of STREAM_FROM_BYTES or more whose rows are whole cache lines is written with non-temporal stores (as
   ops/batchnorm_inference's): beside its input it outgrows a 32 MiB last-level cache anyway, and streaming it saves
   the read of each output line that an ordinary store makes first (1.37x and 1.35x per round against ordinary
   stores, 260 MiB-L3 Intel VM, 2026-11-24, load 3.5). Each thread fences its streamed stores. */
#define STREAM_FROM_BYTES (16 << 20)
void rmsnorm(const float* restrict x, const float* restrict w, float* restrict out, int64_t rows, int64_t cols,
             double eps) {
    int stream = rows * cols * (int64_t)sizeof(float) >= STREAM_FROM_BYTES && cols % 16 == 0
                 && ((uintptr_t)out & 63) == 0;
    (void)stream;
    #pragma omp parallel
    {
    #pragma omp for schedule(dynamic, CHUNK) nowait
    for (int64_t r = 0; r < rows; ++r) {
        const float* restrict row = x + r * cols;
        float* restrict dst = out + r * cols;
        float sq = 0.0f;
        #pragma omp simd reduction(+:sq)
        for (int64_t i = 0; i < cols; ++i) sq += row[i] * row[i];
        float scale = 1.0f / sqrtf(sq / (float)cols + (float)eps);
        int64_t i = 0;
#ifdef __AVX512F__
        if (stream) {  /* rows are whole cache lines */
            __m512 vscale = _mm512_set1_ps(scale);
            for (; i + 16 <= cols; i += 16)
                _mm512_stream_ps(dst + i, _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(row + i), vscale),
                                                        _mm512_loadu_ps(w + i)));
        }
#elif defined(__AVX2__)
        {
            __m256 vscale = _mm256_set1_ps(scale);
            if (stream) {  /* rows are whole cache lines */
                for (; i + 16 <= cols; i += 16) {
                    _mm256_stream_ps(dst + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(row + i), vscale),
                                                            _mm256_loadu_ps(w + i)));
                    _mm256_stream_ps(dst + i + 8, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(row + i + 8), vscale),
                                                                _mm256_loadu_ps(w + i + 8)));
                }
            }
        }
#endif
        #pragma omp simd
        for (int64_t j = i; j < cols; ++j) dst[j] = row[j] * scale * w[j];
    }
#if defined(__AVX512F__) || defined(__AVX2__)
    _mm_sfence();
#endif
    }
}
"""
lib = load_c("rmsnorm", SOURCE, functions=["rmsnorm"], flags=["-O3", "-march=native", "-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        dim = self.weight.shape[0]
        out = torch.empty_like(x)
        lib.rmsnorm(x, self.weight.contiguous(), out, x.numel() // dim, dim, self.eps)
        return out
