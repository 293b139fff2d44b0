"""Native seed for ops/kl_div: per row, sum(q * (log q - log p)) with log p = s - lse(s) and log q = t - lse(t), reading
each row from memory once and with two exponentials per element instead of three: lse(s) (max, then the sum of exp(s
- max)); then over t, e = exp(t - max t) gives S = sum(e) and W = sum(e * (t - s)), and the row's term is W / S +
lse(s) - lse(t). Rows split across OpenMP threads (dynamic chunks of CHUNK rows; a row pair is 32 KiB at the
benchmark shape, in L1); the rows' terms are added in double and divided by the batch size ("batchmean"). AVX-512
with a vectorised 2^t for t <= 0 (see exp2neg16) while the next rows are prefetched into L2 (see kl_row). Measured
2026-11-25 on an AMD EPYC Zen 3 (AVX2, 2 cores) with scripts/bench_native.py: the portable path took the seed from
1.12x to 3.40x over eager.

The portable path (where AVX-512 is missing) was compute-bound: two general exponentials (exp_simd, some 30 vector
operations each) an element. Since 2026-11-28 it takes both maxes in 32 lanes and uses exp2neg, a plain-C 2^t for t <= 0
that gcc vectorises (14 operations), on u log2 e with u = x - max, prefetching the next rows' lines one per 16 elements;
W sums e (u_t - u_s), which holds no offset of the rows (the old e (t - s) in float was off by 2e-2 at offsets of 1e6,
by 3e-4 at 1e5). -fno-trapping-math lets exp2neg's clamp become a vector select. Measured 2026-11-28 on an AMD EPYC Zen
4, x86-64-v3 build as a proxy for an AVX2 CPU, on a machine shared with other jobs: `scripts/bench_seed_ab.py --tasks
kl_div --march x86-64-v3 --before HEAD` 2.06x to 2.18x per round (paired, four runs); `scripts/bench_native.py
--no-compile --march x86-64-v3` of the copy-bandwidth roofline: 21% to 50% (the old and the new seed one after the
other, copy 30 and 26 GB/s) and 61% in a quieter moment (copy 38 GB/s)."""

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
/* 2^t of 16 floats for t <= 0 (callers pass t = (x - the row's max) log2 e, one fused multiply-subtract): n = round(t),
   f = t - n in [-1/2, 1/2], a degree-5 polynomial for 2^f (fitted for relative error, about 2e-7) and scalef for the
   2^n: nine vector operations where a general exp with a two-part ln 2 reduction takes thirteen. Underflows to 0
   below 2^-150, as expf does. */
static inline __m512 exp2neg16(__m512 t) {
    t = _mm512_max_ps(t, _mm512_set1_ps(-150.0f));
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
/* 2^t of one float for t <= 0 in plain C that gcc vectorises (callers pass t = (x - the row's max) log2 e):
   n = round(t) by adding 1.5 * 2^23 + 127, which also leaves n + 127 in the low bits, so 2^n is those bits shifted
   into the exponent field; f = t - n in [-1/2, 1/2] and exp2neg16's degree-5 polynomial for 2^f (relative error about
   2e-7). Below -127 the clamp makes 2^n, so the result, 0 (expf's is below 2^-126 there); NaN stays NaN. 14 vector
   operations where a general exponential takes some 30 with its two clamps, two-part ln 2 and two-factor scaling. */
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
#endif
#ifdef __AVX512F__
static float row_max(const float* restrict row, int64_t cols) {
    __m512 m0 = _mm512_set1_ps(-INFINITY), m1 = m0, m2 = m0, m3 = m0;
    int64_t i = 0;
    for (; i + 64 <= cols; i += 64) {
        m0 = _mm512_max_ps(m0, _mm512_loadu_ps(row + i));
        m1 = _mm512_max_ps(m1, _mm512_loadu_ps(row + i + 16));
        m2 = _mm512_max_ps(m2, _mm512_loadu_ps(row + i + 32));
        m3 = _mm512_max_ps(m3, _mm512_loadu_ps(row + i + 48));
    }
    for (; i < cols; i += 16) m0 = _mm512_max_ps(m0, _mm512_mask_loadu_ps(m0, tail16(cols - i), row + i));
    return _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(m0, m1), _mm512_max_ps(m2, m3)));
}
#endif

/* `np`, `nq`: the rows this thread most likely takes next, fetched into L2 while this row's exponentials run from L1
   (the max passes are the only ones that read memory: without the prefetch the core would stream and compute in
   turns). */
static double kl_row(const float* restrict p, const float* restrict q, const float* np, const float* nq,
                     int64_t cols) {
#ifdef __AVX512F__
    float maxp = row_max(p, cols), maxq = row_max(q, cols);
    __m512 mp = _mm512_set1_ps(maxp * 1.44269504088896341f), mq = _mm512_set1_ps(maxq * 1.44269504088896341f);
    __m512 sp = _mm512_setzero_ps(), sq = sp, w = sp;
    int64_t i = 0;
    for (; i + 16 <= cols; i += 16) {
        _mm_prefetch((const char*)(np + i), _MM_HINT_T1);
        _mm_prefetch((const char*)(nq + i), _MM_HINT_T1);
        __m512 vp = _mm512_loadu_ps(p + i), vq = _mm512_loadu_ps(q + i);
        sp = _mm512_add_ps(sp, exp2neg16(to_exp2(vp, mp)));
        __m512 e = exp2neg16(to_exp2(vq, mq));
        sq = _mm512_add_ps(sq, e);
        w = _mm512_fmadd_ps(e, _mm512_sub_ps(vq, vp), w);
    }
    if (i < cols) {
        __mmask16 k = tail16(cols - i);
        __m512 vp = _mm512_maskz_loadu_ps(k, p + i), vq = _mm512_maskz_loadu_ps(k, q + i);
        sp = _mm512_mask_add_ps(sp, k, sp, exp2neg16(to_exp2(vp, mp)));
        __m512 e = _mm512_maskz_mov_ps(k, exp2neg16(to_exp2(vq, mq)));
        sq = _mm512_add_ps(sq, e);
        w = _mm512_fmadd_ps(e, _mm512_sub_ps(vq, vp), w);
    }
    float sump = _mm512_reduce_add_ps(sp), sumq = _mm512_reduce_add_ps(sq), ws = _mm512_reduce_add_ps(w);
    double lse_p = (double)maxp + log((double)sump), lse_q = (double)maxq + log((double)sumq);
#else
    /* both maxes in 32 lanes (four AVX2 vectors each, so the loads do not wait on one accumulator) */
    float mp[32], mq[32], maxp = -INFINITY, maxq = -INFINITY, sump = 0.0f, sumq = 0.0f, ws = 0.0f;
    for (int j = 0; j < 32; ++j) mp[j] = mq[j] = -INFINITY;
    int64_t i = 0;
    for (; i + 32 <= cols; i += 32) {
        #pragma omp simd
        for (int j = 0; j < 32; ++j) {
            mp[j] = p[i + j] > mp[j] ? p[i + j] : mp[j];
            mq[j] = q[i + j] > mq[j] ? q[i + j] : mq[j];
        }
    }
    for (; i < cols; ++i) { maxp = p[i] > maxp ? p[i] : maxp; maxq = q[i] > maxq ? q[i] : maxq; }
    for (int j = 0; j < 32; ++j) { maxp = mp[j] > maxp ? mp[j] : maxp; maxq = mq[j] > maxq ? mq[j] : maxq; }
    /* u = x - max, exact near the max: t = u log2 e for the exponentials, and ws sums e (u_q - u_p), which carries no
       offset of the rows (its rounding would outweigh the divergence); lse_p and lse_q are each row's log-sum-exp
       less its max */
    float sp[8] = {0}, sq[8] = {0}, w[8] = {0};  /* one AVX2 vector each: two exponentials a lane */
    for (i = 0; i + 16 <= cols; i += 16) {  /* and one line of each next row into L2, a step */
        __builtin_prefetch(np + i, 0, 2);
        __builtin_prefetch(nq + i, 0, 2);
        for (int h = 0; h < 16; h += 8) {
            #pragma omp simd
            for (int j = 0; j < 8; ++j) {
                float up = p[i + h + j] - maxp, uq = q[i + h + j] - maxq;
                float e = exp2neg(uq * 1.44269504088896341f);
                sp[j] += exp2neg(up * 1.44269504088896341f);
                sq[j] += e;
                w[j] += e * (uq - up);
            }
        }
    }
    for (; i < cols; ++i) {
        float up = p[i] - maxp, uq = q[i] - maxq;
        float e = exp2neg(uq * 1.44269504088896341f);
        sump += exp2neg(up * 1.44269504088896341f);
        sumq += e;
        ws += e * (uq - up);
    }
    for (int j = 0; j < 8; ++j) { sump += sp[j]; sumq += sq[j]; ws += w[j]; }
    double lse_p = log((double)sump), lse_q = log((double)sumq);
#endif
    return (double)ws / (double)sumq + lse_p - lse_q;
}

void kl_div(const float* restrict s, const float* restrict t, float* restrict out, int64_t rows, int64_t cols) {
    double total = 0.0;
    #pragma omp parallel for schedule(dynamic, CHUNK) reduction(+:total)
    for (int64_t r = 0; r < rows; ++r) {
        int64_t next = r + 1 < rows ? r + 1 : r;
        total += kl_row(s + r * cols, t + r * cols, s + next * cols, t + next * cols, cols);
    }
    out[0] = (float)(total / (double)rows);
}
"""
lib = load_c("kl_div", SOURCE, functions=["kl_div"], flags=["-O3", "-march=native", "-fopenmp", "-fno-trapping-math"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, student_logits: torch.Tensor, teacher_logits: torch.Tensor) -> torch.Tensor:
        s, t = student_logits.contiguous(), teacher_logits.contiguous()
        out = torch.empty((), dtype=s.dtype)
        lib.kl_div(s, t, out, s.shape[0], s.shape[-1])
        return out
