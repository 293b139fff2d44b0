"""Native seed for ops/mish: x * tanh(softplus(x)) = x * p / (p + 2) with n = e^x and p = n (n + 2) (x itself
above 20, where the ratio is 1 in fp32), elementwise; OpenMP over blocks of BLOCK elements (static: one contiguous
band per thread), AVX-512 with a vectorised exponential (see exp16) and rcp14 plus a Newton step for the division,
unmasked except for the tail (masked stores are slow on AMD Zen 4). Where AVX-512 is missing, an omp simd loop with
exp_simd, the same polynomial in plain C that gcc vectorises (built for x86-64-v3 on a 2-CPU Intel Xeon VM,
2026-11-25: 12.5 ms with glibc's scalar expf, 4.5 with exp_simd; eager 14.8, the AVX-512 path 3.3)."""

import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <math.h>
#include <stdint.h>
#include <string.h>
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
#define BLOCK 8192
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
#endif
#ifdef __AVX512F__
static inline __m512 op16(__m512 v) {
    const __m512 two = _mm512_set1_ps(2.0f), big = _mm512_set1_ps(20.0f);
    __m512 n = exp16(_mm512_min_ps(v, big)), p = _mm512_mul_ps(n, _mm512_add_ps(n, two)), d = _mm512_add_ps(p, two);
    __m512 r = _mm512_rcp14_ps(d);
    r = _mm512_mul_ps(r, _mm512_fnmadd_ps(d, r, two));  /* one Newton step: 1 / d to about 2^-28 */
    __m512 y = _mm512_mul_ps(_mm512_mul_ps(v, p), r);
    return _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(v, big, _CMP_GT_OQ), v);
}
#endif

void mish(const float* restrict x, float* restrict out, int64_t n) {
    int64_t blocks = (n + BLOCK - 1) / BLOCK;
    #pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < blocks; ++b) {
        int64_t i = b * BLOCK, end = i + BLOCK < n ? i + BLOCK : n;
#ifdef __AVX512F__
        for (; i + 16 <= end; i += 16) _mm512_storeu_ps(out + i, op16(_mm512_loadu_ps(x + i)));
        if (i < end) {  /* masked stores are slow on some CPUs (AMD Zen 4): only the tail uses one */
            __mmask16 k = tail16(end - i);
            _mm512_mask_storeu_ps(out + i, k, op16(_mm512_maskz_loadu_ps(k, x + i)));
        }
#else
        #pragma omp simd
        for (int64_t j = i; j < end; ++j) {
            float v = x[j], e = exp_simd(v < 20.0f ? v : 20.0f), p = e * (e + 2.0f);
            out[j] = v > 20.0f ? v : v * p / (p + 2.0f);
        }
#endif
    }
}
"""
lib = load_c("mish", SOURCE, functions=["mish"], flags=["-O3", "-march=native", "-fopenmp", "-fno-trapping-math"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.mish(x, out, x.numel())
        return out
