"""Native seed for tiny/softmax: rows split across OpenMP threads (dynamic chunks of CHUNK rows, which keeps both
threads busy when one is preempted); each row (16 KiB at the benchmark shape, so it stays in L1) in three passes: its
max (the only pass that reads memory), exp(x - max) written to the output while summing, and the output scaled by 1/sum
in place. The exponential is an AVX-512 one (see exp16; glibc's expf is several times slower) and, where AVX-512 is
missing, the same polynomial in plain C (exp_simd) in `omp simd` loops, which gcc vectorises for AVX2, SSE or NEON;
-fno-trapping-math lets it turn exp_simd's range checks into vector selects (without it the loop stays scalar). Measured
2026-11-25 on an AMD EPYC Zen 3 (AVX2, 2 cores): the portable path went from 0.28x to 1.36x over eager
(scripts/bench_native.py; 34.2 ms against eager's 9.6 ms before), about the time of copying the same bytes when the
machine is quiet. Streaming stores for the output were measured and lost where the AVX-512 path was written (the output
of one call fits in the last-level cache beside the input, and streaming sends it to DRAM); with a prefetch and the
timer's flush they win now (see below).

The portable path was still compute-bound, and its reading of a row (the max pass) and its exponentials took turns.
Since 2026-11-28 it takes the max in 32 lanes, computes exp2neg, a plain-C 2^t for t <= 0 that gcc vectorises (14 vector
operations where exp_simd takes some 30), on x log2 e - max log2 e in one fused multiply-add (see EXP2_ARG; exp_simd
stays for rows whose max is past MAX_PIVOT), prefetches the next row into L2 one line per 16 elements meanwhile, and
with AVX2 keeps the exponentials in a per-thread scratch row so that the scaled output streams to memory (see
STREAM_FROM_BYTES; 22 to 30% faster than ordinary stores in paired runs with each call's memory flushed first, as the
evaluator times). Measured 2026-11-28 on an AMD EPYC Zen 4, x86-64-v3 build as a proxy for an AVX2 CPU, on a machine
shared with other jobs: `scripts/bench_seed_ab.py --tasks softmax --march x86-64-v3 --before HEAD` 1.88x to 1.93x per
round (paired, three runs); `scripts/bench_native.py --no-compile --march x86-64-v3` of the copy-bandwidth roofline: 38%
to 89% (the old and the new seed one after the other, copy 30 and 26 GB/s) and 98% in a quieter moment (copy 38 GB/s).
The AVX-512 path got the same prefetch and streaming on 2026-11-28: there streaming alone measured 17% slower, the
prefetch alone 7% faster and the two together 28% faster (paired, each call's memory flushed first, as the evaluator's
timer does since 2026-11-25); `scripts/bench_seed_ab.py --tasks softmax --before HEAD` gave 1.29x to 1.36x per round
(three runs).

NaN and inf, since 2026-11-28 on the AVX-512 path too: a row holding a NaN or a +inf comes out all NaN and a -inf gives
0, as in PyTorch (exp16's clamps put the constant first, since vmaxps and vminps return their second operand when either
is NaN: they dropped the NaN, which made such a row finite)."""

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
/* The exponent of a row's terms: with a fused multiply-add, x log2 e - m in one rounding, m being the max times log2 e
   rounded to a float (softmax keeps only the terms' ratios, which m does not change; |max| <= MAX_PIVOT keeps the
   largest t at half an ulp of m, under 1); without one, (x - max) log2 e. */
#define MAX_PIVOT 1e7f
#ifdef FP_FAST_FMAF
#define EXP2_ARG(x, mx, m) fmaf((x), 1.44269504088896341f, -(m))
#else
#define EXP2_ARG(x, mx, m) ((void)(m), ((x) - (mx)) * 1.44269504088896341f)
#endif
#ifdef __AVX2__
#include <immintrin.h>  /* _mm256_stream_ps for a large output (see STREAM_FROM_BYTES) */
#endif
#endif
/* `next`: the row this thread most likely takes next, fetched into L2 while this row's exponentials run from L1 (the
   max pass is the only one that reads memory: without the prefetch the core would stream and compute in turns).
   `scratch`: where the exponentials go before the scaling, or 0 for the output itself (see softmax). */
#ifdef __AVX512F__
static void softmax_row(const float* restrict row, const float* next, float* restrict dst, int64_t cols,
                        float* scratch) {
    float* e = scratch ? scratch : dst;
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
        _mm_prefetch((const char*)(next + i), _MM_HINT_T1);
        _mm_prefetch((const char*)(next + i + 16), _MM_HINT_T1);
        __m512 e0 = exp16(_mm512_sub_ps(_mm512_loadu_ps(row + i), vmx));
        __m512 e1 = exp16(_mm512_sub_ps(_mm512_loadu_ps(row + i + 16), vmx));
        _mm512_storeu_ps(e + i, e0);
        _mm512_storeu_ps(e + i + 16, e1);
        s0 = _mm512_add_ps(s0, e0);
        s1 = _mm512_add_ps(s1, e1);
    }
    for (; i < cols; i += 16) {
        __mmask16 k = tail16(cols - i);
        __m512 v = _mm512_maskz_mov_ps(k, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, row + i), vmx)));
        _mm512_mask_storeu_ps(e + i, k, v);
        s0 = _mm512_add_ps(s0, v);
    }
    __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(_mm512_add_ps(s0, s1)));
    if (scratch) {  /* rows start on cache lines (see softmax) */
        for (i = 0; i < cols; i += 16) _mm512_stream_ps(dst + i, _mm512_mul_ps(_mm512_load_ps(e + i), inv));
        return;
    }
    for (i = 0; i + 16 <= cols; i += 16) _mm512_storeu_ps(dst + i, _mm512_mul_ps(_mm512_loadu_ps(dst + i), inv));
    if (i < cols) {  /* masked stores are slow on some CPUs (AMD Zen 4): only the tail uses one */
        __mmask16 k = tail16(cols - i);
        _mm512_mask_storeu_ps(dst + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, dst + i), inv));
    }
}
#else
static void softmax_row(const float* restrict row, const float* next, float* restrict dst, int64_t cols,
                        float* scratch) {
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
    float* e = scratch ? scratch : dst;
    if (fabsf(mx) <= MAX_PIVOT) {
        float scaled_max = mx * 1.44269504088896341f;
        float s[16] = {0};
        for (i = 0; i + 16 <= cols; i += 16) {  /* 16 lanes, and one line of the next row into L2, a step */
            __builtin_prefetch(next + i, 0, 2);
            #pragma omp simd
            for (int j = 0; j < 16; ++j) {
                float v = exp2neg(EXP2_ARG(row[i + j], mx, scaled_max));
                e[i + j] = v;
                s[j] += v;
            }
        }
        for (; i < cols; ++i) { float v = exp2neg(EXP2_ARG(row[i], mx, scaled_max)); e[i] = v; sum += v; }
        for (int j = 0; j < 16; ++j) sum += s[j];
    } else {  /* a max past MAX_PIVOT, inf or -inf (a row of them): exp_simd of x - max */
        #pragma omp simd reduction(+:sum)
        for (i = 0; i < cols; ++i) { float v = exp_simd(row[i] - mx); e[i] = v; sum += v; }
    }
    float inv = 1.0f / sum;
#ifdef __AVX2__
    if (scratch) {  /* rows start on cache lines (see softmax) */
        __m256 vinv = _mm256_set1_ps(inv);
        for (i = 0; i < cols; i += 8) _mm256_stream_ps(dst + i, _mm256_mul_ps(_mm256_load_ps(e + i), vinv));
        return;
    }
#endif
    #pragma omp simd
    for (i = 0; i < cols; ++i) dst[i] = e[i] * inv;
}
#endif

/* With AVX-512 or AVX2, an output of STREAM_FROM_BYTES or more whose rows start on cache lines and hold at most
   SCRATCH_FLOATS is written with non-temporal stores: each row's exponentials go to a per-thread scratch row (in L1)
   and the scaled values stream to memory, which saves the read of each output line that an ordinary store makes
   first. Each thread fences its streamed stores. */
#define STREAM_FROM_BYTES (8 << 20)
#define SCRATCH_FLOATS 8192
void softmax(const float* restrict x, float* restrict out, int64_t rows, int64_t cols) {
#if defined(__AVX512F__) || defined(__AVX2__)
    int stream = rows * cols * (int64_t)sizeof(float) >= STREAM_FROM_BYTES && cols % 16 == 0
                 && cols <= SCRATCH_FLOATS && (uintptr_t)out % 64 == 0;
#else
    int stream = 0;
#endif
    #pragma omp parallel
    {
        float scratch[SCRATCH_FLOATS] __attribute__((aligned(64)));
        #pragma omp for schedule(dynamic, CHUNK) nowait
        for (int64_t r = 0; r < rows; ++r)
            softmax_row(x + r * cols, x + (r + 1 < rows ? r + 1 : r) * cols, out + r * cols, cols,
                        stream ? scratch : 0);
#if defined(__AVX512F__) || defined(__AVX2__)
        if (stream) _mm_sfence();
#endif
    }
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
