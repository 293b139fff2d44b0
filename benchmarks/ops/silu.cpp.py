"""Native seed for ops/silu: x * sigmoid(x) elementwise, OpenMP over blocks of BLOCK elements (static: contiguous
bands), AVX-512 with a vectorised exponential (see exp_neg16; glibc's expf is several times slower) and a true
division (see silu16), unmasked except for the tail (masked stores are slow on AMD Zen 4); a portable path where
AVX-512 is missing with exp_simd, the same polynomial in plain C that gcc vectorises in omp simd loops
(-fno-trapping-math lets its clamps become vector selects). Measured 2026-11-25 on an AMD EPYC Zen 3 (AVX2, 2 cores)
with scripts/bench_native.py: the portable path took the seed from 0.31x to 1.51x over eager."""

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
/* exp(-v) of 16 floats as 2^t, t = -v log2 e clamped to [-150, 129]: n = round(t), f = t - n in [-1/2, 1/2], a
   degree-5 polynomial for 2^f (fitted for relative error, about 2e-7; ops/swiglu's) and scalef for the 2^n, which
   overflows to inf past 2^128 as PyTorch's fp32 exp(-v) does: eleven vector operations where a general exp of -v
   with a two-part ln 2 reduction takes fourteen. */
static inline __m512 exp_neg16(__m512 v) {
    __m512 t = _mm512_mul_ps(v, _mm512_set1_ps(-1.44269504088896341f));
    t = _mm512_min_ps(_mm512_max_ps(t, _mm512_set1_ps(-150.0f)), _mm512_set1_ps(129.0f));
    __m512 n = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 f = _mm512_sub_ps(t, n);
    __m512 p = _mm512_set1_ps(1.327647129073739e-3f);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.675540961325169e-3f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.550713092088699e-2f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.402212023735046e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.931469440460205e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.000000119209290f));
    return _mm512_scalef_ps(p, n);
}
/* the lanes of a 16-wide step that lie before the end, `left` elements away */
static inline __mmask16 tail16(int64_t left) { return left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1); }
#endif
#ifdef __AVX512F__
/* x / (1 + exp(-x)) as PyTorch computes it, with a true division: where exp(-x) overflows the quotient is -0, and
   at -inf it is -inf / inf = NaN, as in PyTorch. A reciprocal (rcp14 and a Newton step) needs a clamped, finite 2^t
   and then fix-ups for both cases (v / 2^126 gave -3.5 at -3e38, and -inf at -inf). Paired (load 5.7): 1.07x
   against the seed before the fix-ups, 1.02x against it with them. */
static inline __m512 silu16(__m512 v) {
    return _mm512_div_ps(v, _mm512_add_ps(_mm512_set1_ps(1.0f), exp_neg16(v)));
}
#endif
/* Ordinary stores: non-temporal ones, as relu and hardswish use, measured 0.84-1.07x (median 0.93x) paired against
   these in eight runs on a loaded machine (silu does far more arithmetic per byte than they do): not used here. */
void silu(const float* restrict x, float* restrict out, int64_t n) {
    int64_t blocks = (n + BLOCK - 1) / BLOCK;
    #pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < blocks; ++b) {
        int64_t start = b * BLOCK, end = start + BLOCK < n ? start + BLOCK : n;
#ifdef __AVX512F__
        int64_t i = start;
        for (; i + 16 <= end; i += 16) _mm512_storeu_ps(out + i, silu16(_mm512_loadu_ps(x + i)));
        if (i < end) {  /* masked stores are slow on some CPUs (AMD Zen 4): only the tail uses one */
            __mmask16 k = tail16(end - i);
            _mm512_mask_storeu_ps(out + i, k, silu16(_mm512_maskz_loadu_ps(k, x + i)));
        }
#else
        #pragma omp simd
        for (int64_t i = start; i < end; ++i) out[i] = x[i] / (1.0f + exp_simd(-x[i]));
#endif
    }
}
"""
lib = load_c("silu", SOURCE, functions=["silu"], flags=["-O3", "-march=native", "-fopenmp", "-fno-trapping-math"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.silu(x, out, x.numel())
        return out
