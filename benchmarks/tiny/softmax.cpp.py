"""Native seed for tiny/softmax: rows split across OpenMP threads (dynamic chunks of CHUNK rows, which keeps both
threads busy when one is preempted); each row (16 KiB at the benchmark shape, so it stays in L1) in three passes: its
max (the only pass that reads memory), exp(x - max) written to the output while summing, and the output scaled by
1/sum in place. The exponential is an AVX-512 one (see exp16; glibc's expf is several times slower) and, where
AVX-512 is missing, the same polynomial in plain C (exp_simd) in `omp simd` loops, which gcc vectorises for AVX2, SSE
or NEON; -fno-trapping-math lets it turn exp_simd's range checks into vector selects (without it the loop stays
scalar). Measured 2026-11-25 on an AMD EPYC Zen 3 (AVX2, 2 cores): the portable path went from 0.28x to 1.36x over
eager (scripts/bench_native.py; 34.2 ms against eager's 9.6 ms before), about the time of copying the same bytes when
the machine is quiet. Streaming stores for the output were measured and lost where the AVX-512 path was written: the
output of one call fits in the last-level cache beside the input, and streaming sends it to DRAM."""

import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <math.h>
#include <stdint.h>
#include <string.h>
#define CHUNK 16
#ifdef __AVX512F__
#include <immintrin.h>
/* exp of 16 floats: n = round(x log2 e), r = x - n ln2 (two-part ln2), a degree-6 polynomial for e^r on
   [-ln2/2, ln2/2] and scalef for the 2^n (relative error about 2e-7; underflows to 0 below -104). */
static inline __m512 exp16(__m512 x) {
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-104.0f)), _mm512_set1_ps(88.7f));
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
#else
/* exp of one float in plain C that gcc vectorises inside `omp simd` loops (AVX2, SSE, NEON; with -fno-trapping-math,
   which lets the clamps become vector selects): n = round(x log2 e) by the 1.5 * 2^23 trick, r = x - n ln2 (two-part
   ln2), a degree-6 polynomial for e^r on [-ln2/2, ln2/2] and 2^n as the product of two powers of two built in the
   exponent bits, so results below the normal range become subnormal or 0 and those above it inf, as expf's do
   (relative error under 3e-7 where the result is normal; -inf gives 0, inf gives inf, NaN stays NaN). */
static inline float exp_simd(float x) {
    float c = x < -104.0f ? -104.0f : x;  /* in this order NaN stays NaN */
    c = c > 89.0f ? 89.0f : c;
    float t = c * 1.44269504089f + 12582912.0f;
    float n = t - 12582912.0f;
    float r = c - n * 0.693145751953125f;
    r = r - n * 1.428606820309417e-06f;
    float p = 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    int32_t ni, half, b1, b2;
    memcpy(&ni, &t, 4);
    ni -= 0x4B400000;                   /* n, from -150 to 128 */
    half = ni >> 1;
    b1 = (half + 127) << 23;
    b2 = (ni - half + 127) << 23;
    float s1, s2;
    memcpy(&s1, &b1, 4);
    memcpy(&s2, &b2, 4);
    return p * s1 * s2;
}
#endif
static void softmax_row(const float* restrict row, float* restrict dst, int64_t cols) {
#ifdef __AVX512F__
    __m512 m0 = _mm512_set1_ps(-INFINITY), m1 = m0, m2 = m0, m3 = m0;
    int64_t i = 0;
    for (; i + 64 <= cols; i += 64) {
        m0 = _mm512_max_ps(m0, _mm512_loadu_ps(row + i));
        m1 = _mm512_max_ps(m1, _mm512_loadu_ps(row + i + 16));
        m2 = _mm512_max_ps(m2, _mm512_loadu_ps(row + i + 32));
        m3 = _mm512_max_ps(m3, _mm512_loadu_ps(row + i + 48));
    }
    for (; i < cols; i += 16) m0 = _mm512_max_ps(m0, _mm512_mask_loadu_ps(m0, tail16(cols - i), row + i));
    __m512 vmx = _mm512_set1_ps(_mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(m0, m1), _mm512_max_ps(m2, m3))));
    __m512 s0 = _mm512_setzero_ps(), s1 = s0;
    for (i = 0; i + 32 <= cols; i += 32) {
        __m512 e0 = exp16(_mm512_sub_ps(_mm512_loadu_ps(row + i), vmx));
        __m512 e1 = exp16(_mm512_sub_ps(_mm512_loadu_ps(row + i + 16), vmx));
        _mm512_storeu_ps(dst + i, e0);
        _mm512_storeu_ps(dst + i + 16, e1);
        s0 = _mm512_add_ps(s0, e0);
        s1 = _mm512_add_ps(s1, e1);
    }
    for (; i < cols; i += 16) {
        __mmask16 k = tail16(cols - i);
        __m512 e = _mm512_maskz_mov_ps(k, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, row + i), vmx)));
        _mm512_mask_storeu_ps(dst + i, k, e);
        s0 = _mm512_add_ps(s0, e);
    }
    __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(_mm512_add_ps(s0, s1)));
    for (i = 0; i + 16 <= cols; i += 16) _mm512_storeu_ps(dst + i, _mm512_mul_ps(_mm512_loadu_ps(dst + i), inv));
    if (i < cols) {  /* masked stores are slow on some CPUs (AMD Zen 4): only the tail uses one */
        __mmask16 k = tail16(cols - i);
        _mm512_mask_storeu_ps(dst + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, dst + i), inv));
    }
#else
    float mx = -INFINITY, sum = 0.0f;
    #pragma omp simd reduction(max:mx)
    for (int64_t i = 0; i < cols; ++i) mx = row[i] > mx ? row[i] : mx;
    #pragma omp simd reduction(+:sum)
    for (int64_t i = 0; i < cols; ++i) { float e = exp_simd(row[i] - mx); dst[i] = e; sum += e; }
    float inv = 1.0f / sum;
    #pragma omp simd
    for (int64_t i = 0; i < cols; ++i) dst[i] *= inv;
#endif
}

void softmax(const float* restrict x, float* restrict out, int64_t rows, int64_t cols) {
    #pragma omp parallel for schedule(dynamic, CHUNK)
    for (int64_t r = 0; r < rows; ++r) softmax_row(x + r * cols, out + r * cols, cols);
}
"""
lib = load_c("softmax", SOURCE, functions=["softmax"], flags=["-O3", "-march=native", "-fopenmp", "-fno-trapping-math"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        cols = x.shape[-1]
        out = torch.empty_like(x)
        lib.softmax(x, out, x.numel() // cols, cols)
        return out
