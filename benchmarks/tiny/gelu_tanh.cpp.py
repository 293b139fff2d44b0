"""Native seed for tiny/gelu_tanh: 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), computed as the equal x / (1
+ 2^t), t = -2u log2 e; elementwise, OpenMP over blocks of BLOCK elements (static: one contiguous band per thread),
AVX-512 with a vectorised 2^t (see exp2_16) and a true division, unmasked except for the tail (masked stores are slow
on AMD Zen 4); a portable path where AVX-512 is missing with exp2_simd, the same polynomial in plain C that gcc
vectorises in omp simd loops, clamped to bounds read at run time (see EXP2_LO). Where 2^t overflows (x below about
-10) the division gives PyTorch's -0, and at x = -inf its NaN. Measured 2026-11-25 on an AMD EPYC Zen 3 (AVX2, 2
cores) with scripts/bench_native.py: the portable path took the seed from 0.72x to 3.85x over eager. Since 2026-11-28
both paths take 2^t (one rounding, a degree-5 polynomial) in place of a general e^x (two-part ln 2 reduction, degree
6, and in plain C both clamps and subnormal-safe scaling), and the portable path no longer has the second division
and three blends a vector that gcc made of constant clamps (AMD EPYC Zen 4, x86-64-v3 build as a proxy for an AVX2
CPU, `scripts/bench_seed_ab.py --tasks gelu_tanh --march x86-64-v3 --before HEAD --budget-s 4`: 3.12 -> 1.84 ms,
1.70x paired, roofline 59% -> 101%, 98% in `scripts/bench_native.py --march x86-64-v3`; the AVX-512 build, the same
command without --march: 1.03x paired, 93% -> 96%, and it now gives NaN at -inf and -0 at -3e38 where its clamped
exponential and reciprocal gave -inf and -0.9)."""

import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <math.h>
#include <stdint.h>
#include <string.h>
/* 2^t of one float in plain C that gcc vectorises inside `omp simd` loops (AVX2, SSE, NEON), for t in [-127, 128]
   (callers clamp; NaN gives NaN): n = round(t) by the 1.5 * 2^23 trick, f = t - n in [-1/2, 1/2], a degree-5
   polynomial for 2^f (fitted for relative error, about 2e-7) and 2^n built in the exponent bits, which are 0 at
   n = -127 (results below about 2^-126.5 flush to 0 rather than going subnormal) and inf at n = 128. Eleven vector
   operations where a general exp (two-part ln 2 reduction, degree 6, both clamps, subnormal-safe scaling) takes
   about twenty. */
static inline float exp2_simd(float t) {
    float k = t + 12582912.0f;
    float n = k - 12582912.0f;
    float f = t - n;
    float p = 1.327647129073739e-3f;
    p = p * f + 9.675540961325169e-3f;
    p = p * f + 5.550713092088699e-2f;
    p = p * f + 2.402212023735046e-1f;
    p = p * f + 6.931469440460205e-1f;
    p = p * f + 1.000000119209290f;
    uint32_t b;
    memcpy(&b, &k, 4);                  /* 0x4B400000 + n: (b + 127) << 23 keeps the low 9 bits, n + 127 */
    b = (b + 127u) << 23;
    float s;
    memcpy(&s, &b, 4);
    return p * s;
}
/* exp2_simd's domain, read at run time (once a block): with constant bounds gcc copies the exponential and the
   division into each clamped path, folds them there and blends the paths back (two divisions and three blends a
   vector); with these the clamps are one vmaxps and one vminps (AVX2). A NaN may leave them as a bound: the
   NaN of the result comes from x itself. */
static volatile float EXP2_LO = -127.0f, EXP2_HI = 128.0f;
#define BLOCK 8192
#ifdef __AVX512F__
#include <immintrin.h>
/* 2^t of 16 floats: n = round(t), f = t - n in [-1/2, 1/2], the degree-5 polynomial of exp2_simd for 2^f and scalef
   for the 2^n, which goes subnormal, 0 and inf as the true 2^t does (t clamped by the caller) */
static inline __m512 exp2_16(__m512 t) {
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
static inline __m512 op16(__m512 v) {
    __m512 t = _mm512_mul_ps(v, _mm512_fmadd_ps(_mm512_mul_ps(v, v), _mm512_set1_ps(-0.10294324160f),
                                                _mm512_set1_ps(-2.3022081982f)));  /* -2u log2 e */
    t = _mm512_min_ps(_mm512_max_ps(t, _mm512_set1_ps(-150.0f)), _mm512_set1_ps(129.0f));
    /* a true division: where 2^t is inf (x below about -10) the quotient is -0, and at x = -inf it is -inf / inf =
       NaN, as PyTorch's 0.5 x (1 + tanh(u)) gives */
    return _mm512_div_ps(v, _mm512_add_ps(_mm512_set1_ps(1.0f), exp2_16(t)));
}
#endif

void gelu_tanh(const float* restrict x, float* restrict out, int64_t n) {
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
        const float lo = EXP2_LO, hi = EXP2_HI;
        #pragma omp simd
        for (int64_t j = i; j < end; ++j) {
            float v = x[j], t = v * (v * v * -0.10294324160f + -2.3022081982f);  /* -2u log2 e */
            t = t < lo ? lo : t;
            t = t > hi ? hi : t;
            out[j] = v / (1.0f + exp2_simd(t));
        }
#endif
    }
}
"""
lib = load_c("gelu_tanh", SOURCE, functions=["gelu_tanh"],
           flags=["-O3", "-march=native", "-fopenmp", "-fno-trapping-math"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.gelu_tanh(x, out, x.numel())
        return out
