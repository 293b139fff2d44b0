"""Native seed for ops/silu: x * sigmoid(x) elementwise, OpenMP over blocks of BLOCK elements (static: contiguous
bands), AVX-512 with a vectorised exponential (see exp_neg16; glibc's expf is several times slower) and a true
division (see silu16), unmasked except for the tail (masked stores are slow on AMD Zen 4); a portable path where
AVX-512 is missing: x / (1 + 2^t), t = -x log2 e, with exp2_simd, a polynomial in plain C that gcc vectorises in omp
simd loops, clamped to bounds read at run time (see EXP2_LO), and on an AVX2 CPU the same operations in intrinsics for
the outputs it streams (see silu8 and STREAM_FROM_BYTES). Measured 2026-11-25 on an AMD EPYC Zen 3 (AVX2, 2 cores)
with scripts/bench_native.py: the portable path took the seed from 0.31x to 1.51x over eager. Since 2026-11-28 the
portable path takes 2^t (one rounding, a degree-5 polynomial) in place of a general e^x (two-part ln 2 reduction,
degree 6, subnormal-safe scaling) without the blends gcc made of constant clamps (1.33x paired), and streams a large
output on AVX2 (1.24x paired over that) (AMD EPYC Zen 4, x86-64-v3 build as a proxy for an AVX2 CPU,
`scripts/bench_seed_ab.py --tasks silu --march x86-64-v3 --before HEAD --budget-s 4`: 2.39 -> 1.32 ms, 1.85x paired,
roofline 74% -> 134%, of copy 79% -> 143% (a copy with ordinary stores reads each output line first); 125% in
`scripts/bench_native.py --march x86-64-v3` at a 36.6 GB/s copy peak; the AVX-512 path unchanged, 1.00x paired,
99%)."""

import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <math.h>
#include <stdint.h>
#include <string.h>
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif
/* 2^t of one float in plain C that gcc vectorises inside `omp simd` loops (AVX2, SSE, NEON), for t in [-127, 128]
   (callers clamp; NaN gives NaN): n = round(t) by the 1.5 * 2^23 trick, f = t - n in [-1/2, 1/2], a degree-5
   polynomial for 2^f (fitted for relative error, about 2e-7; exp_neg16's) and 2^n built in the exponent bits, which
   are 0 at n = -127 (results below about 2^-126.5 flush to 0 rather than going subnormal) and inf at n = 128. Eleven
   vector operations where a general exp (two-part ln 2 reduction, degree 6, both clamps, subnormal-safe scaling)
   takes about twenty. */
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
   division into each clamped path, folds them there and blends the paths back; with these the clamps are one vmaxps
   and one vminps (AVX2). A NaN may leave them as a bound: the NaN of the result comes from x itself. */
static volatile float EXP2_LO = -127.0f, EXP2_HI = 128.0f;
/* silu(x) for the portable path: x / (1 + 2^t), t = -x log2 e clamped to exp2_simd's domain (at 128 the exponential
   is inf and the quotient -0, or NaN at x = -inf, as PyTorch's; at -127 it is 0 and the quotient x, inf at inf) */
static inline float silu1(float v, float lo, float hi) {
    float t = v * -1.44269504089f;
    t = t < lo ? lo : t;
    t = t > hi ? hi : t;
    return v / (1.0f + exp2_simd(t));
}
#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__)
/* silu1 of 8 floats in AVX2 intrinsics (the same operations), for the blocks an AVX2 CPU streams: gcc has no way to
   write a plain-C loop's vectors with non-temporal stores */
static inline __m256 silu8(__m256 v, __m256 lo, __m256 hi) {
    __m256 t = _mm256_mul_ps(v, _mm256_set1_ps(-1.44269504089f));
    t = _mm256_min_ps(_mm256_max_ps(t, lo), hi);
    __m256 k = _mm256_add_ps(t, _mm256_set1_ps(12582912.0f));
    __m256 f = _mm256_sub_ps(t, _mm256_sub_ps(k, _mm256_set1_ps(12582912.0f)));
    __m256 p = _mm256_set1_ps(1.327647129073739e-3f);
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(9.675540961325169e-3f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(5.550713092088699e-2f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(2.402212023735046e-1f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(6.931469440460205e-1f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.000000119209290f));
    __m256i b = _mm256_slli_epi32(_mm256_add_epi32(_mm256_castps_si256(k), _mm256_set1_epi32(127)), 23);
    __m256 e = _mm256_mul_ps(p, _mm256_castsi256_ps(b));
    return _mm256_div_ps(v, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}
#endif
#define STREAM_FROM_BYTES (16 << 20)
#define BLOCK 8192
#ifdef __AVX512F__
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
/* The AVX-512 path: ordinary stores. Non-temporal ones, as relu and hardswish use, measured 0.84-1.07x (median 0.93x)
   paired against these in eight runs on a loaded machine (silu does far more arithmetic per byte than they do). The
   portable path on an AVX2 CPU streams an output of STREAM_FROM_BYTES or more (beside its input it outgrows a 32 MiB
   last-level cache): 1.24x paired against ordinary stores (x86-64-v3 build, AMD Zen 4, 2026-11-28). Each thread
   fences its streamed stores. */
void silu(const float* restrict x, float* restrict out, int64_t n) {
    int64_t blocks = (n + BLOCK - 1) / BLOCK;
    int stream = n * (int64_t)sizeof(float) >= STREAM_FROM_BYTES && ((uintptr_t)out & 63) == 0;
    (void)stream;
    #pragma omp parallel
    {
    #pragma omp for schedule(static) nowait
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
        const float lo = EXP2_LO, hi = EXP2_HI;
        int64_t i = start;
#if defined(__AVX2__) && defined(__FMA__)
        if (stream) {  /* blocks start on cache lines: BLOCK floats are whole lines */
            const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
            for (; i + 16 <= end; i += 16) {
                _mm256_stream_ps(out + i, silu8(_mm256_loadu_ps(x + i), vlo, vhi));
                _mm256_stream_ps(out + i + 8, silu8(_mm256_loadu_ps(x + i + 8), vlo, vhi));
            }
        }
#endif
        #pragma omp simd
        for (int64_t j = i; j < end; ++j) out[j] = silu1(x[j], lo, hi);
#endif
    }
#if !defined(__AVX512F__) && defined(__AVX2__) && defined(__FMA__)
    _mm_sfence();
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
