"""Native seed for ops/silu: x * sigmoid(x) elementwise, OpenMP over blocks of BLOCK elements (static: contiguous
bands), AVX-512 with a vectorised exponential (see exp_neg16; glibc's expf is several times slower), a reciprocal
(rcp14 and a Newton step) for the division, unmasked except for the tail (masked stores are slow on AMD Zen 4); a
portable expf loop where AVX-512 is missing."""

import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <math.h>
#include <stdint.h>
#define BLOCK 8192
#ifdef __AVX512F__
#include <immintrin.h>
/* exp(-v) of 16 floats as 2^t, t = -v log2 e clamped to [-150, 126] (2^126 keeps 1 + 2^t, its reciprocal and the
   Newton step normal and finite, and v / 2^126 is within 1e-4 of PyTorch's -0 up to |v| = 8e33): n = round(t),
   f = t - n in [-1/2, 1/2], a degree-5 polynomial for 2^f (fitted for relative error, about 2e-7; ops/swiglu's) and
   scalef for the 2^n: eleven vector operations where a general exp of -v with a two-part ln 2 reduction takes
   fourteen. */
static inline __m512 exp_neg16(__m512 v) {
    __m512 t = _mm512_mul_ps(v, _mm512_set1_ps(-1.44269504088896341f));
    t = _mm512_min_ps(_mm512_max_ps(t, _mm512_set1_ps(-150.0f)), _mm512_set1_ps(126.0f));
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
#define SILU_ZERO_BELOW -88.7228394f  /* -ln(FLT_MAX): exp(-x) is inf in fp32 below it */
static inline __m512 silu16(__m512 v) {
    __m512 d = _mm512_add_ps(_mm512_set1_ps(1.0f), exp_neg16(v));
    __m512 r = _mm512_rcp14_ps(d);  /* 1 / d to 14 bits, then one Newton step: about 2^-28 */
    __m512 y = _mm512_mul_ps(v, _mm512_mul_ps(r, _mm512_fnmadd_ps(d, r, _mm512_set1_ps(2.0f))));
    /* PyTorch's x / (1 + exp(-x)) in fp32 is -0 below SILU_ZERO_BELOW (exp(-x) overflows), where v / 2^126 from the
       clamped 2^t grows with |v| (-3.5 at -3e38); and -inf / inf = NaN at -inf, where the clamped 2^t gives -inf:
       one fix-up (input class -inf, the fifth, answers token 3, a quiet NaN; every other class keeps y) */
    y = _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(v, _mm512_set1_ps(SILU_ZERO_BELOW), _CMP_LT_OQ), _mm512_set1_ps(-0.0f));
    return _mm512_fixupimm_ps(y, v, _mm512_set1_epi32(3 << 16), 0);
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
        for (int64_t i = start; i < end; ++i) out[i] = x[i] / (1.0f + expf(-x[i]));
#endif
    }
}
"""
lib = load_c("silu", SOURCE, functions=["silu"], flags=["-O3", "-march=native", "-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.silu(x, out, x.numel())
        return out
