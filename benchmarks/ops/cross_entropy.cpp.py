"""Native seed for ops/cross_entropy: mean over rows of logsumexp(row) - row[target], reading the logits once: rows
split across OpenMP threads (dynamic chunks of CHUNK rows); each row (32 KiB at the benchmark shape, in L1) in two
passes: its max (the only pass that reads memory) and the sum of exp(x - max) (AVX-512 2^t for t <= 0, see exp2neg16,
while the next row is prefetched into L2). Per-row losses are summed in double. A target outside [0, classes) makes
the call return nonzero (PyTorch raises there too). Measured 2026-11-25 on an AMD EPYC Zen 3 (AVX2, 2 cores) with
scripts/bench_native.py: the portable path took the seed from 0.32x to 1.94x over eager.

The portable path (where AVX-512 is missing) was compute-bound: its general exponential (exp_simd) took some 30 vector
operations an element. Since 2026-11-28 it takes the max in 32 lanes and sums exp2neg, a plain-C 2^t for t <= 0 that gcc
vectorises (14 operations), on x log2 e - max log2 e in one fused multiply-add (see EXP2_ARG: the log-sum-exp is then
exact for rows far from 0 too, where the old max + logf(sum) in float was off by 5e-3 at an offset of 1e6), with the
next row's lines prefetched one per 16 elements; exp_simd stays for rows whose max is past MAX_PIVOT. Measured
2026-11-28 on an AMD EPYC Zen 4, x86-64-v3 build as a proxy for an AVX2 CPU, on a machine shared with other jobs:
`scripts/bench_seed_ab.py --tasks cross_entropy --march x86-64-v3 --before HEAD` 2.15x to 2.62x per round (paired, three
runs); `scripts/bench_native.py --no-compile --march x86-64-v3` of the copy-bandwidth roofline: 23% to 59% (the old and
the new seed one after the other, copy 30 and 26 GB/s) and 73% in a quieter moment (copy 38 GB/s).

NaN and inf, since 2026-11-28 on the AVX-512 path too: a row holding a NaN or a +inf makes the loss NaN, as in PyTorch,
and a -inf at a row's target makes it inf (exp2neg16's clamp puts the constant first, since vmaxps returns its second
operand when either is NaN: it dropped the NaN, which made the loss finite or inf)."""

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
#define CHUNK 16
#ifdef __AVX512F__
#include <immintrin.h>
/* 2^t of 16 floats for t <= 0 (callers pass t = (x - the row's max) log2 e, one fused multiply-subtract): n = round(t),
   f = t - n in [-1/2, 1/2], a degree-5 polynomial for 2^f (fitted for relative error, about 2e-7) and scalef for the
   2^n: nine vector operations where a general exp with a two-part ln 2 reduction takes thirteen. Underflows to 0
   below 2^-150, as expf does. */
static inline __m512 exp2neg16(__m512 t) {
    t = _mm512_max_ps(_mm512_set1_ps(-150.0f), t);  /* the constant first: vmaxps returns its second operand when
                                                      either is NaN, so NaN stays NaN */
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
/* (x - max) log2 e with the product and the subtraction fused; `scaled_max` is max * log2 e */
static inline __m512 to_exp2(__m512 x, __m512 scaled_max) {
    return _mm512_fmsub_ps(x, _mm512_set1_ps(1.44269504088896341f), scaled_max);
}
/* the lanes of a 16-wide step that lie before the end, `left` elements away */
static inline __mmask16 tail16(int64_t left) { return left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1); }
#else
/* 2^t of one float in plain C that gcc vectorises, for t <= 0 and up to a few above (callers pass t = (x - the row's
   max) log2 e, or x log2 e - m with m the max times log2 e rounded, see EXP2_ARG): n = round(t) by adding
   1.5 * 2^23 + 127, which also leaves n + 127 in the low bits, so 2^n is those bits shifted into the exponent field;
   f = t - n in [-1/2, 1/2] and exp2neg16's degree-5 polynomial for 2^f (relative error about 2e-7). Below -127 the
   clamp makes 2^n, so the result, 0 (expf's is below 2^-126 there); NaN stays NaN. 14 vector operations where
   exp_simd takes some 30 with its two clamps, two-part ln 2 and two-factor scaling. */
static inline float exp2neg(float t) {
    t = t < -127.0f ? -127.0f : t;
    float k = t + 12583039.0f;
    float f = t - (k - 12583039.0f);
    float p = 1.327647129073739e-3f;
    p = p * f + 9.675540961325169e-3f;
    p = p * f + 5.550713092088699e-2f;
    p = p * f + 2.402212023735046e-1f;
    p = p * f + 6.931469440460205e-1f;
    p = p * f + 1.000000119209290f;
    int32_t bits;
    memcpy(&bits, &k, 4);
    bits <<= 23;
    float scale;
    memcpy(&scale, &bits, 4);
    return p * scale;
}
/* The exponent of a row's terms. With a fused multiply-add: x L - m in one rounding, L being log2 e as a float and m
   the max times L rounded to a float, and the row's log-sum-exp is then (m + max (log2 e - L)) ln 2 + log(sum) in
   double (exact in m; the second term makes up for L's rounding, to 2e-8 of x - max). |max| <= MAX_PIVOT keeps the
   largest t at half an ulp of m, under 1. Without one: (x - max) L and max + log(sum) (exact near the max). */
#define MAX_PIVOT 1e7f
#ifdef FP_FAST_FMAF
#define EXP2_ARG(x, mx, m) fmaf((x), 1.44269504088896341f, -(m))
#define EXP2_PIVOT(mx, m) \
    (((double)(m) + (double)(mx) * (1.44269504088896340736 - (double)1.44269504088896341f)) * 0.693147180559945309)
#else
#define EXP2_ARG(x, mx, m) (((x) - (mx)) * 1.44269504088896341f)
#define EXP2_PIVOT(mx, m) ((void)(m), (double)(mx))
#endif
#endif
/* `next`: the row this thread most likely takes next, fetched into L2 while this row's exponentials run from L1 (the
   max pass is the only one that reads memory: without the prefetch the core would stream and compute in turns). */
static double logsumexp_row(const float* restrict row, const float* next, int64_t cols) {
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
    float mx = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(m0, m1), _mm512_max_ps(m2, m3)));
    __m512 vmx = _mm512_set1_ps(mx * 1.44269504088896341f), s0 = _mm512_setzero_ps(), s1 = s0;
    for (i = 0; i + 32 <= cols; i += 32) {
        _mm_prefetch((const char*)(next + i), _MM_HINT_T1);
        _mm_prefetch((const char*)(next + i + 16), _MM_HINT_T1);
        s0 = _mm512_add_ps(s0, exp2neg16(to_exp2(_mm512_loadu_ps(row + i), vmx)));
        s1 = _mm512_add_ps(s1, exp2neg16(to_exp2(_mm512_loadu_ps(row + i + 16), vmx)));
    }
    for (; i < cols; i += 16) {
        __mmask16 k = tail16(cols - i);
        s0 = _mm512_mask_add_ps(s0, k, s0, exp2neg16(to_exp2(_mm512_maskz_loadu_ps(k, row + i), vmx)));
    }
    return mx + logf(_mm512_reduce_add_ps(_mm512_add_ps(s0, s1)));
#else
    /* the max in 32 lanes (four AVX2 vectors, so the loads do not wait on one accumulator) */
    float m[32], mx = -INFINITY, sum = 0.0f;
    for (int j = 0; j < 32; ++j) m[j] = -INFINITY;
    int64_t i = 0;
    for (; i + 32 <= cols; i += 32) {
        #pragma omp simd
        for (int j = 0; j < 32; ++j) m[j] = row[i + j] > m[j] ? row[i + j] : m[j];
    }
    for (; i < cols; ++i) mx = row[i] > mx ? row[i] : mx;
    for (int j = 0; j < 32; ++j) mx = m[j] > mx ? m[j] : mx;
    if (!(fabsf(mx) <= MAX_PIVOT)) {  /* a max past MAX_PIVOT, inf or -inf (a row of them): exp_simd of x - max */
        #pragma omp simd reduction(+:sum)
        for (i = 0; i < cols; ++i) sum += exp_simd(row[i] - mx);
        return (double)mx + log((double)sum);
    }
    float scaled_max = mx * 1.44269504088896341f;
    float s[16] = {0};
    for (i = 0; i + 16 <= cols; i += 16) {  /* 16 lanes, and one line of the next row into L2, a step */
        __builtin_prefetch(next + i, 0, 2);
        #pragma omp simd
        for (int j = 0; j < 16; ++j) s[j] += exp2neg(EXP2_ARG(row[i + j], mx, scaled_max));
    }
    for (; i < cols; ++i) sum += exp2neg(EXP2_ARG(row[i], mx, scaled_max));
    for (int j = 0; j < 16; ++j) sum += s[j];
    return EXP2_PIVOT(mx, scaled_max) + log((double)sum);
#endif
}

int cross_entropy(const float* restrict x, const int64_t* restrict target, float* restrict out, int64_t rows,
                  int64_t cols) {
    double total = 0.0;
    int bad = 0;
    #pragma omp parallel for schedule(dynamic, CHUNK) reduction(+:total) reduction(|:bad)
    for (int64_t r = 0; r < rows; ++r) {
        const float* restrict row = x + r * cols;
        int64_t t = target[r];
        if (t < 0 || t >= cols) { bad = 1; continue; }
        total += logsumexp_row(row, r + 1 < rows ? row + cols : row, cols) - (double)row[t];
    }
    out[0] = (float)(total / (double)rows);
    return bad;
}
"""
lib = load_c("cross_entropy", SOURCE, functions=["cross_entropy"],
           flags=["-O3", "-march=native", "-fopenmp", "-fno-trapping-math"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logits, targets = logits.contiguous(), targets.contiguous()
        out = torch.empty((), dtype=logits.dtype)
        if lib.cross_entropy(logits, targets, out, logits.shape[0], logits.shape[1]) != 0:
            raise IndexError("cross_entropy: a target is outside [0, classes)")
        return out
