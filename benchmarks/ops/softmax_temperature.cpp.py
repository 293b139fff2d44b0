"""Native seed for ops/softmax_temperature: softmax(x / t) over the last dimension, the division fused in as a
multiplication by 1/t while the row's max is found (so it holds for a negative t too). Rows split across OpenMP threads
(dynamic chunks of CHUNK rows, which keeps both threads busy when one is preempted); each row (16 KiB at the benchmark
shape, so it stays in L1) in three passes: its max (the only pass that reads memory), exp(x - max) written to the output
while summing, and the output scaled by 1/sum in place. The exponential is an AVX-512 one (see exp16; glibc's expf is
several times slower) with a portable path where AVX-512 is missing (exp2neg, plain C that gcc vectorises;
-fno-trapping-math lets its clamp become a vector select). Streaming stores for the output were measured and lost on the
AVX-512 path at first (the output of one call fits in the last-level cache beside the input, and streaming sends it to
DRAM); with a prefetch and the timer's flush they win now (see below). Measured 2026-11-25 on an AMD EPYC Zen 3 (AVX2, 2
cores) with scripts/bench_native.py: the portable path took the seed from 0.35x to 1.87x over eager.

The portable path was still compute-bound, and its reading of a row (the max pass) and its exponentials took turns.
Since 2026-11-28 it takes the max in 32 lanes, computes exp2neg, a plain-C 2^t for t <= 0 that gcc vectorises (14 vector
operations where the general exp_simd took some 30), on (x / t - max) log2 e with the product and the difference fused,
prefetches the next row into L2 one line per 16 elements meanwhile, and with AVX2 keeps the exponentials in a per-thread
scratch row so that the scaled output streams to memory (see STREAM_FROM_BYTES; 22 to 30% faster than ordinary stores in
paired runs with each call's memory flushed first, as the evaluator times). Measured 2026-11-28 on an AMD EPYC Zen 4,
x86-64-v3 build as a proxy for an AVX2 CPU, on a machine shared with other jobs: `scripts/bench_seed_ab.py --tasks
softmax_temperature --march x86-64-v3 --before HEAD` 1.62x to 1.79x per round (paired, three runs);
`scripts/bench_native.py --no-compile --march x86-64-v3` of the copy-bandwidth roofline: 37% to 80% (the old and the new
seed one after the other, copy 30 and 26 GB/s) and 92% in a quieter moment (copy 38 GB/s). The AVX-512 path got the same
prefetch and streaming on 2026-11-28 (29% faster in a paired C test with each call's memory flushed first, as the
evaluator's timer does since 2026-11-25; as in tiny/softmax, streaming alone would lose there):
`scripts/bench_seed_ab.py --tasks softmax_temperature --before HEAD` gave 1.22x and 1.30x per round (two runs).

NaN and inf, since 2026-11-28 on the AVX-512 path too: a row holding a NaN or a +inf (after the division by t) comes out
all NaN and a -inf gives 0, as in PyTorch (exp16's clamps put the constant first, since vmaxps and vminps return their
second operand when either is NaN: they dropped the NaN, which made such a row finite)."""

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
/* 2^t of one float in plain C that gcc vectorises, for t <= 0 and up to a few above (callers pass t = (x / t - the
   row's max) log2 e, with the product and the difference fused, see softmax_row): n = round(t) by adding
   1.5 * 2^23 + 127, which also leaves n + 127 in the low bits, so 2^n is those bits shifted into the exponent field;
   f = t - n in [-1/2, 1/2] and exp2neg16's degree-5 polynomial for 2^f (relative error about 2e-7). Below -127 the
   clamp makes 2^n, so the result, 0 (expf's is below 2^-126 there); NaN stays NaN. 14 vector operations where
   a general exponential takes some 30 with its two clamps, two-part ln 2 and two-factor scaling. */
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
/* x / t - max with the product and the difference fused where the target has fused multiply-adds */
#ifdef FP_FAST_FMAF
#define SCALED_MINUS_MAX(x, inv_t, mx) fmaf((x), (inv_t), -(mx))
#else
#define SCALED_MINUS_MAX(x, inv_t, mx) ((x) * (inv_t) - (mx))
#endif
#ifdef __AVX2__
#include <immintrin.h>  /* _mm256_stream_ps for a large output (see STREAM_FROM_BYTES) */
#endif
#endif
/* `next`: the row this thread most likely takes next, fetched into L2 while this row's exponentials run from L1 (the
   max pass is the only one that reads memory: without the prefetch the core would stream and compute in turns).
   `scratch`: where the exponentials go before the scaling, or 0 for the output itself (see softmax_temperature). */
#ifdef __AVX512F__
static void softmax_row(const float* restrict row, const float* next, float* restrict dst, int64_t cols, float inv_t,
                        float* scratch) {
    float* e = scratch ? scratch : dst;
    __m512 vt = _mm512_set1_ps(inv_t);
    __m512 m0 = _mm512_set1_ps(-INFINITY), m1 = m0, m2 = m0, m3 = m0;
    int64_t i = 0;
    for (; i + 64 <= cols; i += 64) {
        m0 = _mm512_max_ps(m0, _mm512_mul_ps(_mm512_loadu_ps(row + i), vt));
        m1 = _mm512_max_ps(m1, _mm512_mul_ps(_mm512_loadu_ps(row + i + 16), vt));
        m2 = _mm512_max_ps(m2, _mm512_mul_ps(_mm512_loadu_ps(row + i + 32), vt));
        m3 = _mm512_max_ps(m3, _mm512_mul_ps(_mm512_loadu_ps(row + i + 48), vt));
    }
    for (; i < cols; i += 16) {
        __mmask16 k = tail16(cols - i);
        m0 = _mm512_mask_max_ps(m0, k, m0, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, row + i), vt));
    }
    __m512 vmx = _mm512_set1_ps(_mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(m0, m1), _mm512_max_ps(m2, m3))));
    __m512 s0 = _mm512_setzero_ps(), s1 = s0;
    for (i = 0; i + 32 <= cols; i += 32) {
        _mm_prefetch((const char*)(next + i), _MM_HINT_T1);
        _mm_prefetch((const char*)(next + i + 16), _MM_HINT_T1);
        __m512 e0 = exp16(_mm512_fmsub_ps(_mm512_loadu_ps(row + i), vt, vmx));
        __m512 e1 = exp16(_mm512_fmsub_ps(_mm512_loadu_ps(row + i + 16), vt, vmx));
        _mm512_storeu_ps(e + i, e0);
        _mm512_storeu_ps(e + i + 16, e1);
        s0 = _mm512_add_ps(s0, e0);
        s1 = _mm512_add_ps(s1, e1);
    }
    for (; i < cols; i += 16) {
        __mmask16 k = tail16(cols - i);
        __m512 v = _mm512_maskz_mov_ps(k, exp16(_mm512_fmsub_ps(_mm512_maskz_loadu_ps(k, row + i), vt, vmx)));
        _mm512_mask_storeu_ps(e + i, k, v);
        s0 = _mm512_add_ps(s0, v);
    }
    __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(_mm512_add_ps(s0, s1)));
    if (scratch) {  /* rows start on cache lines (see softmax_temperature) */
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
static void softmax_row(const float* restrict row, const float* next, float* restrict dst, int64_t cols, float inv_t,
                        float* scratch) {
    /* the max of x / t in 32 lanes (four AVX2 vectors, so the loads do not wait on one accumulator) */
    float m[32], mx = -INFINITY, sum = 0.0f;
    for (int j = 0; j < 32; ++j) m[j] = -INFINITY;
    int64_t i = 0;
    for (; i + 32 <= cols; i += 32) {
        #pragma omp simd
        for (int j = 0; j < 32; ++j) m[j] = row[i + j] * inv_t > m[j] ? row[i + j] * inv_t : m[j];
    }
    for (; i < cols; ++i) mx = row[i] * inv_t > mx ? row[i] * inv_t : mx;
    for (int j = 0; j < 32; ++j) mx = m[j] > mx ? m[j] : mx;
    float* e = scratch ? scratch : dst;
    float s[16] = {0};
    for (i = 0; i + 16 <= cols; i += 16) {  /* 16 lanes, and one line of the next row into L2, a step */
        __builtin_prefetch(next + i, 0, 2);
        #pragma omp simd
        for (int j = 0; j < 16; ++j) {
            float v = exp2neg(SCALED_MINUS_MAX(row[i + j], inv_t, mx) * 1.44269504088896341f);
            e[i + j] = v;
            s[j] += v;
        }
    }
    for (; i < cols; ++i) {
        float v = exp2neg(SCALED_MINUS_MAX(row[i], inv_t, mx) * 1.44269504088896341f);
        e[i] = v;
        sum += v;
    }
    for (int j = 0; j < 16; ++j) sum += s[j];
    float inv = 1.0f / sum;
#ifdef __AVX2__
    if (scratch) {  /* rows start on cache lines (see softmax_temperature) */
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
void softmax_temperature(const float* restrict x, float* restrict out, int64_t rows, int64_t cols, float t) {
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
            softmax_row(x + r * cols, x + (r + 1 < rows ? r + 1 : r) * cols, out + r * cols, cols, 1.0f / t,
                        stream ? scratch : 0);
#if defined(__AVX512F__) || defined(__AVX2__)
        if (stream) _mm_sfence();
#endif
    }
}
"""
lib = load_c("softmax_temperature", SOURCE, functions=["softmax_temperature"],
             flags=["-O3", "-march=native", "-fopenmp", "-fno-trapping-math"])


class ModelNew(nn.Module):
    def __init__(self, temperature: float):
        super().__init__()
        self.temperature = temperature

    def forward(self, logits: torch.Tensor) -> torch.Tensor:
        x = logits.contiguous()
        cols = x.shape[-1]
        out = torch.empty_like(x)
        lib.softmax_temperature(x, out, x.numel() // cols, cols, self.temperature)
        return out
