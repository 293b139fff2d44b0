"""Native seed for tiny/layernorm: rows split across OpenMP threads (dynamic chunks of CHUNK rows); each row in two
passes: one over memory that sums x - k and (x - k)^2 with k the row's first element (a shift that keeps the variance
from cancelling when the mean is large against the spread), then, while the row is still in L1, the normalised,
scaled and shifted output written once. AVX-512 with four accumulator pairs, a portable loop where AVX-512 is
missing, vectorised by omp simd reductions. Measured 2026-11-25 on an AMD EPYC Zen 3 (AVX2, 2 cores) with
scripts/bench_native.py: the portable path took the seed from 0.42x to 1.06x over eager. The second pass writes a large
output with non-temporal stores (AVX-512, and AVX2 intrinsics where the CPU has them) and, on AVX-512, fetches the
next row meanwhile: `scripts/bench_seed_ab.py --tasks layernorm --before HEAD --budget-s 6` on an AMD EPYC Zen 4
(2 cores, 2026-11-28, other benches' builds beside it) measured 1.36x per round (68-77% -> 99-103% of the copy bound),
and with `--march x86-64-v3` (its AVX2 path, a proxy for a CPU without AVX-512) 1.37x.

NaN and inf, since 2026-11-28: a row holding a NaN or an inf comes out all NaN, as in PyTorch (the variance's clamp at 0
keeps a NaN; it made an inf row's variance 0 and its outputs inf)."""

import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <math.h>
#include <stdint.h>
#define CHUNK 16
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif
#ifdef __AVX512F__
/* exp of 16 floats: n = round(x log2 e), r = x - n ln2 (two-part ln2), a degree-6 polynomial for e^r on
   [-ln2/2, ln2/2] and scalef for the 2^n (relative error about 2e-7; underflows to 0 below -104). */
static inline __m512 exp16(__m512 x) {
    /* the constant first: vmaxps and vminps return their second operand when either is NaN, so NaN stays NaN */
    x = _mm512_min_ps(_mm512_set1_ps(88.7f), _mm512_max_ps(_mm512_set1_ps(-104.0f), x));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504089f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606820309417e-06f), r);
    __m512 p = _mm512_set1_ps(1.0f / 720.0f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}
/* the lanes of a 16-wide step that lie before the end, `left` elements away */
static inline __mmask16 tail16(int64_t left) { return left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1); }
#endif
/* Sums of (x - k) and (x - k)^2 over n floats, k = x[0]; the mean and variance follow from them. */
static void shifted_moments(const float* restrict x, int64_t n, double* restrict mean, double* restrict var) {
    float k = n > 0 ? x[0] : 0.0f, s = 0.0f, q = 0.0f;
#ifdef __AVX512F__
    __m512 vk = _mm512_set1_ps(k), s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0, q0 = s0, q1 = s0, q2 = s0,
           q3 = s0;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        __m512 d0 = _mm512_sub_ps(_mm512_loadu_ps(x + i), vk), d1 = _mm512_sub_ps(_mm512_loadu_ps(x + i + 16), vk);
        __m512 d2 = _mm512_sub_ps(_mm512_loadu_ps(x + i + 32), vk), d3 = _mm512_sub_ps(_mm512_loadu_ps(x + i + 48), vk);
        s0 = _mm512_add_ps(s0, d0); q0 = _mm512_fmadd_ps(d0, d0, q0);
        s1 = _mm512_add_ps(s1, d1); q1 = _mm512_fmadd_ps(d1, d1, q1);
        s2 = _mm512_add_ps(s2, d2); q2 = _mm512_fmadd_ps(d2, d2, q2);
        s3 = _mm512_add_ps(s3, d3); q3 = _mm512_fmadd_ps(d3, d3, q3);
    }
    for (; i < n; i += 16) {
        __mmask16 m = tail16(n - i);
        __m512 d = _mm512_maskz_sub_ps(m, _mm512_maskz_loadu_ps(m, x + i), vk);
        s0 = _mm512_add_ps(s0, d); q0 = _mm512_fmadd_ps(d, d, q0);
    }
    s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
    q = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(q0, q1), _mm512_add_ps(q2, q3)));
#else
    #pragma omp simd reduction(+:s, q)
    for (int64_t i = 0; i < n; ++i) { float d = x[i] - k; s += d; q += d * d; }
#endif
    double ms = (double)s / (double)n, v = (double)q / (double)n - ms * ms;
    *mean = (double)k + ms;
    *var = v < 0.0 ? 0.0 : v;  /* in this order NaN (an inf or a NaN in the row) stays NaN: the row's output too */
}

/* An output of STREAM_FROM_BYTES or more whose rows are whole cache lines is written with non-temporal stores (as
   tiny/rmsnorm's): beside its input it outgrows a 32 MiB last-level cache anyway, and streaming it saves the read of
   each output line that an ordinary store makes first. Each thread fences its streamed stores. While a row is
   normalised from L1, the AVX-512 path fetches the next row into L2 (PREFETCH), so that memory is read during the
   second pass too (7% faster with it, AMD Zen 4). */
#define STREAM_FROM_BYTES (16 << 20)
#define PREFETCH 1
void layernorm(const float* restrict x, const float* restrict w, const float* restrict b, float* restrict out,
               int64_t rows, int64_t cols, double eps) {
    int stream = rows * cols * (int64_t)sizeof(float) >= STREAM_FROM_BYTES && cols % 16 == 0
                 && ((uintptr_t)out & 63) == 0;
    (void)stream;
    #pragma omp parallel
    {
    #pragma omp for schedule(dynamic, CHUNK) nowait
    for (int64_t r = 0; r < rows; ++r) {
        const float* restrict row = x + r * cols;
        const float* next = r + 1 < rows ? row + cols : row;
        float* restrict dst = out + r * cols;
        double mean, var;
        shifted_moments(row, cols, &mean, &var);
        float m = (float)mean, rstd = (float)(1.0 / sqrt(var + eps));
        int64_t i = 0;
#ifdef __AVX512F__
        __m512 vm = _mm512_set1_ps(m), vr = _mm512_set1_ps(rstd);
        for (; i + 16 <= cols; i += 16) {
            if (PREFETCH) _mm_prefetch((const char*)(next + i), _MM_HINT_T1);
            __m512 y = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(row + i), vm), vr),
                                       _mm512_loadu_ps(w + i), _mm512_loadu_ps(b + i));
            if (stream) _mm512_stream_ps(dst + i, y);
            else _mm512_storeu_ps(dst + i, y);
        }
        if (i < cols) {  /* masked stores are slow on some CPUs (AMD Zen 4): only the tail uses one */
            __mmask16 k = tail16(cols - i);
            __m512 a = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, row + i), vm), vr);
            _mm512_mask_storeu_ps(dst + i, k,
                                  _mm512_fmadd_ps(a, _mm512_maskz_loadu_ps(k, w + i), _mm512_maskz_loadu_ps(k, b + i)));
        }
#elif defined(__AVX2__) && defined(__FMA__)
        __m256 vm = _mm256_set1_ps(m), vr = _mm256_set1_ps(rstd);
        for (; i + 16 <= cols; i += 16) {  /* no prefetch here: 7% slower with it (x86-64-v3 build, Zen 4) */
            __m256 y0 = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(row + i), vm), vr),
                                        _mm256_loadu_ps(w + i), _mm256_loadu_ps(b + i));
            __m256 y1 = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(row + i + 8), vm), vr),
                                        _mm256_loadu_ps(w + i + 8), _mm256_loadu_ps(b + i + 8));
            if (stream) { _mm256_stream_ps(dst + i, y0); _mm256_stream_ps(dst + i + 8, y1); }
            else { _mm256_storeu_ps(dst + i, y0); _mm256_storeu_ps(dst + i + 8, y1); }
        }
#endif
        (void)next;
        #pragma omp simd
        for (int64_t j = i; j < cols; ++j) dst[j] = (row[j] - m) * rstd * w[j] + b[j];
    }
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
    _mm_sfence();
#endif
    }
}
"""
lib = load_c("layernorm", SOURCE, functions=["layernorm"], flags=["-O3", "-march=native", "-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.dim = dim
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(dim))
        self.bias = nn.Parameter(0.1 * torch.randn(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.layernorm(x, self.weight.contiguous(), self.bias.contiguous(), out, x.numel() // self.dim, self.dim,
                      self.eps)
        return out
