"""Native seed for ops/group_norm: one OpenMP work item per (sample, group) block (CHANNELS / GROUPS planes, 128 KiB at
the benchmark shape, so it stays in L2), dynamic chunks of GROUPS_PER_CHUNK blocks; each block in two passes: one
over memory that sums x - k and (x - k)^2 per plane (k the block's first element: a shift that keeps the variance
from cancelling; per-plane float sums gathered in double), then, from L2, each plane's output x * s + t written once
(s = rstd * weight[c], t = bias[c] - mean * s), a large output by non-temporal stores (see STREAM_FROM_BYTES).
AVX-512 with four accumulator pairs, a portable loop where AVX-512 is missing, vectorised by omp simd reductions.
Measured 2026-11-25 on an AMD EPYC Zen 3 (AVX2, 2 cores) with scripts/bench_native.py: the portable path took the
seed from 0.48x to 1.04x over eager.

NaN and inf, since 2026-11-28: a (sample, group) block holding a NaN or an inf comes out all NaN, as in PyTorch (the
variance's clamp at 0 keeps a NaN; it made an inf block's variance 0 and its outputs inf)."""

import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <math.h>
#include <stdint.h>
#define GROUPS_PER_CHUNK 4
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
#endif
/* Adds the sums of (x - k) and (x - k)^2 over n floats to *sum and *sq. */
static void shifted_sums(const float* restrict x, int64_t n, float k, double* restrict sum, double* restrict sq) {
    float s = 0.0f, q = 0.0f;
#ifdef __AVX512F__
    __m512 vk = _mm512_set1_ps(k), s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0, q0 = s0, q1 = s0, q2 = s0,
           q3 = s0;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        __m512 d0 = _mm512_sub_ps(_mm512_loadu_ps(x + i), vk), d1 = _mm512_sub_ps(_mm512_loadu_ps(x + i + 16), vk);
        __m512 d2 = _mm512_sub_ps(_mm512_loadu_ps(x + i + 32), vk), d3 = _mm512_sub_ps(_mm512_loadu_ps(x + i + 48), vk);
        s0 = _mm512_add_ps(s0, d0); q0 = _mm512_fmadd_ps(d0, d0, q0);
        s1 = _mm512_add_ps(s1, d1); q1 = _mm512_fmadd_ps(d1, d1, q1);
        s2 = _mm512_add_ps(s2, d2); q2 = _mm512_fmadd_ps(d2, d2, q2);
        s3 = _mm512_add_ps(s3, d3); q3 = _mm512_fmadd_ps(d3, d3, q3);
    }
    for (; i < n; i += 16) {
        __mmask16 m = tail16(n - i);
        __m512 d = _mm512_maskz_sub_ps(m, _mm512_maskz_loadu_ps(m, x + i), vk);
        s0 = _mm512_add_ps(s0, d); q0 = _mm512_fmadd_ps(d, d, q0);
    }
    s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
    q = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(q0, q1), _mm512_add_ps(q2, q3)));
#else
    #pragma omp simd reduction(+:s, q)
    for (int64_t i = 0; i < n; ++i) { float d = x[i] - k; s += d; q += d * d; }
#endif
    *sum += (double)s;
    *sq += (double)q;
}

/* An output of STREAM_FROM_BYTES or more whose planes are whole cache lines is written with non-temporal stores (as
   ops/batchnorm_inference's): it outgrows a 32 MiB last-level cache beside its input anyway, and streaming it saves
   the read of each output line that an ordinary store makes first. Paired against ordinary stores (260 MiB-L3 Intel
   VM, 2026-11-24, load 5.4-5.9): 1.45x and 1.50x per round. Each thread fences its streamed stores. */
#define STREAM_FROM_BYTES (16 << 20)
void group_norm(const float* restrict x, const float* restrict w, const float* restrict b, float* restrict out,
                int64_t batch, int64_t channels, int64_t groups, int64_t plane, double eps) {
    int64_t per_group = channels / groups, block = per_group * plane;
    int stream = batch * channels * plane * (int64_t)sizeof(float) >= STREAM_FROM_BYTES && plane % 16 == 0
                 && ((uintptr_t)out & 63) == 0;
    (void)stream;
    #pragma omp parallel
    {
    #pragma omp for schedule(dynamic, GROUPS_PER_CHUNK) nowait
    for (int64_t bg = 0; bg < batch * groups; ++bg) {
        const float* restrict src = x + bg * block;
        float* restrict dst = out + bg * block;
        float k = block > 0 ? src[0] : 0.0f;
        double sum = 0.0, sq = 0.0;
        for (int64_t cc = 0; cc < per_group; ++cc) shifted_sums(src + cc * plane, plane, k, &sum, &sq);
        double ms = sum / (double)block, var = sq / (double)block - ms * ms;
        /* var < 0.0 ? 0.0 : var in this order, so that NaN (an inf or a NaN in the block) stays NaN */
        double mean = (double)k + ms, rstd = 1.0 / sqrt((var < 0.0 ? 0.0 : var) + eps);
        for (int64_t cc = 0; cc < per_group; ++cc) {
            int64_t c = (bg % groups) * per_group + cc;
            float s = (float)(rstd * w[c]), t = (float)(b[c] - mean * rstd * w[c]);
            const float* restrict in = src + cc * plane;
            float* restrict o = dst + cc * plane;
#ifdef __AVX512F__
            __m512 vs = _mm512_set1_ps(s), vt = _mm512_set1_ps(t);
            int64_t i = 0;
            if (stream)  /* planes are whole cache lines */
                for (; i + 16 <= plane; i += 16) _mm512_stream_ps(o + i, _mm512_fmadd_ps(_mm512_loadu_ps(in + i), vs, vt));
            for (; i + 16 <= plane; i += 16) _mm512_storeu_ps(o + i, _mm512_fmadd_ps(_mm512_loadu_ps(in + i), vs, vt));
            if (i < plane) {  /* masked stores are slow on some CPUs (AMD Zen 4): only the tail uses one */
                __mmask16 m = tail16(plane - i);
                _mm512_mask_storeu_ps(o + i, m, _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, in + i), vs, vt));
            }
#else
            #pragma omp simd
            for (int64_t i = 0; i < plane; ++i) o[i] = in[i] * s + t;
#endif
        }
    }
#ifdef __AVX512F__
    _mm_sfence();
#endif
    }
}
"""
lib = load_c("group_norm", SOURCE, functions=["group_norm"], flags=["-O3", "-march=native", "-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self, num_groups: int, channels: int, eps: float = 1e-5):
        super().__init__()
        self.num_groups = num_groups
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(channels))
        self.bias = nn.Parameter(0.1 * torch.randn(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        batch, channels = x.shape[0], x.shape[1]
        lib.group_norm(x, self.weight.contiguous(), self.bias.contiguous(), out, batch, channels, self.num_groups,
                       x.numel() // (batch * channels), self.eps)
        return out
