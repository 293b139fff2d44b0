"""Native seed for ops/swiglu: silu(gate) * up with gate and up the two halves of each row; rows split across OpenMP
threads (static chunks of CHUNK rows), AVX-512 with a vectorised exp(-g) (see exp_neg16) and a true division for the
sigmoid's (see swiglu16), unmasked except for the tail (masked stores are slow on AMD Zen 4); a portable path where
AVX-512 is missing with exp_simd, the same polynomial in plain C that gcc vectorises in omp simd loops
(-fno-trapping-math lets its clamps become vector selects). Both input streams are software-prefetched PREFETCH
floats ahead (measured faster here), and a large output is written with non-temporal stores (see STREAM_FROM_BYTES).
Measured 2026-11-25 on an AMD EPYC Zen 3 (AVX2, 2 cores) with scripts/bench_native.py: the portable path took the
seed from 0.46x to 1.97x over eager."""

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
#define PREFETCH 256  /* floats ahead in each of the two input streams */
/* the address PREFETCH floats past p, formed as an integer: past the last row it points beyond the tensor, which a
   prefetch may (it never faults) but C's pointer arithmetic may not */
#define AHEAD(p) ((const char*)((uintptr_t)(p) + PREFETCH * sizeof(float)))
#ifdef __AVX512F__
#include <immintrin.h>
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
        #pragma omp simd
        for (int64_t j = i; j < hidden; ++j) dst[j] = gate[j] / (1.0f + exp_simd(-gate[j])) * up[j];
#endif
    }
#ifdef __AVX512F__
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
