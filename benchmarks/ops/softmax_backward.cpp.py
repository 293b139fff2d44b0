"""Native seed for ops/softmax_backward: y = softmax(x), out = y * (dy - sum(dy * y)) per row, with x and dy read from
memory once: rows split across OpenMP threads (dynamic chunks of CHUNK rows); per row (16 KiB each, in L1) the max of
x; e = exp(x - max) written to the output while summing e and dy * e; then out = e / S * (dy - (dy . e) / S). AVX-512
with a vectorised exponential (see exp16; glibc's expf is several times slower), unmasked except for the tail (masked
stores are slow on AMD Zen 4); a portable path where AVX-512 is missing: e = 2^t, t = (x - max) log2 e, with
exp2_simd, a polynomial in plain C that gcc vectorises in omp simd loops, its clamp's bound read at run time (see
EXP2_LO). Measured 2026-11-25 on an AMD EPYC Zen 3 (AVX2, 2 cores) with scripts/bench_native.py: the portable path
took the seed from 0.58x to 3.03x over eager. Since 2026-11-28 the portable path takes 2^t (one rounding, a degree-5
polynomial, one clamp) in place of a general e^x (two-part ln 2 reduction, degree 6, both clamps, subnormal-safe
scaling) (AMD EPYC Zen 4, x86-64-v3 build as a proxy for an AVX2 CPU, `scripts/bench_seed_ab.py --tasks
softmax_backward --march x86-64-v3 --before HEAD --budget-s 4`: 3.23 -> 2.88 ms, 1.13x paired (1.12x in another run
at load 1.7; 1.38-1.51x at load 2.2-2.5, where the arithmetic counts more), roofline 86% -> 97%, of copy 92% -> 103%;
87% in `scripts/bench_native.py --march x86-64-v3` at a 36.6 GB/s copy peak; the AVX-512 path 1.00x paired, 88%), and
the AVX-512 path's clamps keep a NaN (a NaN logit made its row finite there; PyTorch's row is NaN). Tried on the
portable path and not kept: streaming the output on AVX2 (e kept in a per-thread scratch row: 0.95-1.08x paired over
five runs; recomputing e instead: slower still), fetching the next row into L2 meanwhile (0.90x), and taking the next
row's max while scaling this one's output (0.95x)."""

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
/* exp2_simd's lower bound, read at run time (once a row): with a constant one gcc masks the result with a compare
   and an and; with this the clamp is one vmaxps (AVX2). t = (x - max) log2 e is never above 0, or it is NaN (a NaN
   logit, or inf - inf where the max is inf), which `t < lo ? lo : t` keeps and exp2_simd turns into NaN: the row's
   sum and output are NaN then, as PyTorch's. */
static volatile float EXP2_LO = -127.0f;
/* e^(x - max) of one element of a row, for the portable path */
static inline float exp_shifted(float v, float mx, float lo) {
    float t = (v - mx) * 1.44269504088896341f;
    t = t < lo ? lo : t;
    return exp2_simd(t);
}
#define CHUNK 16
#ifdef __AVX512F__
#include <immintrin.h>
/* exp of 16 floats: n = round(x log2 e), r = x - n ln2 (two-part ln2), a degree-6 polynomial for e^r on
   [-ln2/2, ln2/2] and scalef for the 2^n (relative error about 2e-7; underflows to 0 below -104). The clamps take
   the bound first: max and min give their second operand where either is NaN, so a NaN stays NaN and makes its
   row's sum and output NaN, as PyTorch's (with x first a NaN logit became e^-104 and its row finite). */
static inline __m512 exp16(__m512 x) {
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

static void softmax_backward_row(const float* restrict row, const float* restrict g, float* restrict dst,
                                 int64_t cols) {
#ifdef __AVX512F__
    __m512 vmx = _mm512_set1_ps(row_max(row, cols)), s = _mm512_setzero_ps(), d = s;
    int64_t i = 0;
    for (; i + 16 <= cols; i += 16) {
        __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(row + i), vmx));
        _mm512_storeu_ps(dst + i, e);
        s = _mm512_add_ps(s, e);
        d = _mm512_fmadd_ps(_mm512_loadu_ps(g + i), e, d);
    }
    if (i < cols) {
        __mmask16 k = tail16(cols - i);
        __m512 e = _mm512_maskz_mov_ps(k, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, row + i), vmx)));
        _mm512_mask_storeu_ps(dst + i, k, e);
        s = _mm512_add_ps(s, e);
        d = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, g + i), e, d);
    }
    float inv = 1.0f / _mm512_reduce_add_ps(s);
    __m512 vinv = _mm512_set1_ps(inv), dot = _mm512_set1_ps(_mm512_reduce_add_ps(d) * inv);
    for (i = 0; i + 16 <= cols; i += 16) {
        __m512 y = _mm512_mul_ps(_mm512_loadu_ps(dst + i), vinv);
        _mm512_storeu_ps(dst + i, _mm512_mul_ps(y, _mm512_sub_ps(_mm512_loadu_ps(g + i), dot)));
    }
    if (i < cols) {  /* masked stores are slow on some CPUs (AMD Zen 4): only the tail uses one */
        __mmask16 k = tail16(cols - i);
        __m512 y = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, dst + i), vinv);
        _mm512_mask_storeu_ps(dst + i, k, _mm512_mul_ps(y, _mm512_sub_ps(_mm512_maskz_loadu_ps(k, g + i), dot)));
    }
#else
    float mx = -INFINITY, sum = 0.0f, dot = 0.0f;
    const float lo = EXP2_LO;
    #pragma omp simd reduction(max:mx)
    for (int64_t i = 0; i < cols; ++i) mx = row[i] > mx ? row[i] : mx;
    #pragma omp simd reduction(+:sum, dot)
    for (int64_t i = 0; i < cols; ++i) { float e = exp_shifted(row[i], mx, lo); dst[i] = e; sum += e; dot += g[i] * e; }
    float inv = 1.0f / sum;
    dot *= inv;
    #pragma omp simd
    for (int64_t i = 0; i < cols; ++i) dst[i] = dst[i] * inv * (g[i] - dot);
#endif
}

void softmax_backward(const float* restrict x, const float* restrict dy, float* restrict out, int64_t rows,
                      int64_t cols) {
    #pragma omp parallel for schedule(dynamic, CHUNK)
    for (int64_t r = 0; r < rows; ++r) softmax_backward_row(x + r * cols, dy + r * cols, out + r * cols, cols);
}
"""
lib = load_c("softmax_backward", SOURCE, functions=["softmax_backward"],
           flags=["-O3", "-march=native", "-fopenmp", "-fno-trapping-math"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, grad_output: torch.Tensor) -> torch.Tensor:
        x, dy = logits.contiguous(), grad_output.contiguous()
        cols = x.shape[-1]
        out = torch.empty_like(x)
        lib.softmax_backward(x, dy, out, x.numel() // cols, cols)
        return out
