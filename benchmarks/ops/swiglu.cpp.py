"""Native seed for ops/swiglu: silu(gate) * up with gate and up the two halves of each row; rows split across OpenMP
threads (static chunks of CHUNK rows), AVX-512 with a vectorised exp(-g) (see exp_neg16) and a true division for the
sigmoid's (see swiglu16), unmasked except for the tail (masked stores are slow on AMD Zen 4); a portable path where
AVX-512 is missing: g / (1 + 2^t), t = -g log2 e, with exp2_simd, the same polynomial in plain C that gcc vectorises
in omp simd loops, clamped to bounds read at run time (see EXP2_LO), and on an AVX2 CPU the same operations in
intrinsics for the rows it streams (see swiglu8). Both input streams are software-prefetched PREFETCH floats ahead
on the AVX-512 path (measured faster there; on the AVX2 path it measured slower), and a large output is written with
non-temporal stores (see STREAM_FROM_BYTES). Measured 2026-11-25 on an AMD EPYC Zen 3 (AVX2, 2 cores) with
scripts/bench_native.py: the portable path took the seed from 0.46x to 1.97x over eager. Since 2026-11-28 the
portable path takes 2^t (one rounding, a degree-5 polynomial) in place of a general e^x (two-part ln 2 reduction,
degree 6, subnormal-safe scaling), no longer has the second division and blends that gcc made of constant clamps,
and streams its large outputs on AVX2 (1.08x over plain stores, paired in a scratch C harness) (AMD EPYC Zen 4,
x86-64-v3 build as a proxy for an AVX2 CPU, `scripts/bench_seed_ab.py --tasks swiglu --march x86-64-v3 --before
HEAD --budget-s 4`: 1.98 -> 1.62 ms, 1.23x paired, roofline 70% -> 86%, 80% in `scripts/bench_native.py --march
x86-64-v3`; the AVX-512 path unchanged, 1.00x paired, 84%)."""

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
/* exp2_simd's domain, read at run time (once a row): with constant bounds gcc copies the exponential and the
   division into each clamped path, folds them there and blends the paths back (a second division and blends a
   vector); with these the clamps are one vmaxps and one vminps (AVX2). A NaN may leave them as a bound: the
   NaN of the result comes from g itself. */
static volatile float EXP2_LO = -127.0f, EXP2_HI = 128.0f;
/* silu(g) u for the portable path: g / (1 + 2^t), t = -g log2 e clamped to exp2_simd's domain (at 128 the
   exponential is inf and the quotient -0, or NaN at g = -inf, as PyTorch's) */
static inline float swiglu1(float g, float u, float lo, float hi) {
    float t = g * -1.44269504089f;
    t = t < lo ? lo : t;
    t = t > hi ? hi : t;
    return g / (1.0f + exp2_simd(t)) * u;
}
#if defined(__AVX2__) && !defined(__AVX512F__)
/* swiglu1 of 8 floats in AVX2 intrinsics (the same operations), for the rows an AVX2 CPU streams: gcc has no way to
   write a plain-C loop's vectors with non-temporal stores */
static inline __m256 swiglu8(__m256 g, __m256 u, __m256 lo, __m256 hi) {
    __m256 t = _mm256_mul_ps(g, _mm256_set1_ps(-1.44269504089f));
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
    return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), u);
}
#endif
#define CHUNK 16
#define PREFETCH 256  /* floats ahead in each of the two input streams */
/* the address PREFETCH floats past p, formed as an integer: past the last row it points beyond the tensor, which a
   prefetch may (it never faults) but C's pointer arithmetic may not */
#define AHEAD(p) ((const char*)((uintptr_t)(p) + PREFETCH * sizeof(float)))
#ifdef __AVX512F__
/* exp(-g) of 16 floats as 2^t, t = -g log2 e clamped to [-150, 129]: n = round(t), f = t - n in [-1/2, 1/2], a
   degree-5 polynomial for 2^f (fitted for relative error, about 2e-7) and scalef for the 2^n, which overflows to inf
   past 2^128 as PyTorch's fp32 exp(-g) does; ten vector operations where a general exp with a two-part ln 2 reduction
   takes thirteen. */
static inline __m512 exp_neg16(__m512 g) {
    __m512 t = _mm512_mul_ps(g, _mm512_set1_ps(-1.44269504088896341f));
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
/* silu(g) u as PyTorch computes it, g / (1 + exp(-g)) * u, with a true division: where exp(-g) overflows the
   quotient is -0, and at g = -inf it is -inf / inf = NaN, as in PyTorch. A reciprocal (rcp14 and a Newton step)
   needs a clamped, finite 2^t and then fix-ups for both cases (g 2^-64 gave -5e10 at g = -1e30, and -inf at -inf);
   paired, the division measured 1.11x against that with both fix-ups and 1.04x against it before them (one run
   each, load 6.5): the division's throughput is not what limits this loop. */
static inline __m512 swiglu16(__m512 g, __m512 u) {
    __m512 d = _mm512_add_ps(_mm512_set1_ps(1.0f), exp_neg16(g));
    return _mm512_mul_ps(_mm512_div_ps(g, d), u);
}
#endif

/* An output of STREAM_FROM_BYTES or more is written with non-temporal stores where every row starts on a cache line:
   it outgrows the caches anyway, and streaming it to memory saves the read of each output line that an ordinary store
   makes first. Each thread fences its streamed stores. */
#define STREAM_FROM_BYTES (8 << 20)
void swiglu(const float* restrict x, float* restrict out, int64_t rows, int64_t hidden) {
    int stream = rows * hidden * (int64_t)sizeof(float) >= STREAM_FROM_BYTES && hidden % 16 == 0
                 && (uintptr_t)out % 64 == 0;
    (void)stream;
    #pragma omp parallel
    {
    #pragma omp for schedule(static, CHUNK) nowait
    for (int64_t r = 0; r < rows; ++r) {
        const float* restrict gate = x + r * 2 * hidden;
        const float* restrict up = gate + hidden;
        float* restrict dst = out + r * hidden;
        int64_t i = 0;
#ifdef __AVX512F__
        if (stream)
            for (; i + 16 <= hidden; i += 16) {
                _mm_prefetch(AHEAD(gate + i), _MM_HINT_T0);
                _mm_prefetch(AHEAD(up + i), _MM_HINT_T0);
                _mm512_stream_ps(dst + i, swiglu16(_mm512_loadu_ps(gate + i), _mm512_loadu_ps(up + i)));
            }
        else
            for (; i + 16 <= hidden; i += 16) {
                _mm_prefetch(AHEAD(gate + i), _MM_HINT_T0);
                _mm_prefetch(AHEAD(up + i), _MM_HINT_T0);
                _mm512_storeu_ps(dst + i, swiglu16(_mm512_loadu_ps(gate + i), _mm512_loadu_ps(up + i)));
            }
        if (i < hidden) {  /* masked stores are slow on some CPUs (AMD Zen 4): only the tail uses one */
            __mmask16 k = tail16(hidden - i);
            __m512 y = swiglu16(_mm512_maskz_loadu_ps(k, gate + i), _mm512_maskz_loadu_ps(k, up + i));
            _mm512_mask_storeu_ps(dst + i, k, y);
        }
#else
        const float lo = EXP2_LO, hi = EXP2_HI;
#ifdef __AVX2__
        if (stream) {  /* rows of whole cache lines: AVX2 intrinsics, streamed */
            const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
            for (; i + 16 <= hidden; i += 16) {
                _mm256_stream_ps(dst + i, swiglu8(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i), vlo, vhi));
                _mm256_stream_ps(dst + i + 8, swiglu8(_mm256_loadu_ps(gate + i + 8), _mm256_loadu_ps(up + i + 8),
                                                      vlo, vhi));
            }
        }
#endif
        #pragma omp simd
        for (int64_t j = i; j < hidden; ++j) dst[j] = swiglu1(gate[j], up[j], lo, hi);
#endif
    }
#if defined(__AVX512F__) || defined(__AVX2__)
    _mm_sfence();
#endif
    }
}
"""
lib = load_c("swiglu", SOURCE, functions=["swiglu"], flags=["-O3", "-march=native", "-fopenmp", "-fno-trapping-math"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        hidden = x.shape[-1] // 2
        out = torch.empty((*x.shape[:-1], hidden), dtype=x.dtype)
        lib.swiglu(x, out, x.numel() // x.shape[-1], hidden)
        return out
