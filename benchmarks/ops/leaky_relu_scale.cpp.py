"""Native seed for ops/leaky_relu_scale: leaky_relu(x + bias[c], slope) * scale in one vectorised pass, the
channel's bias read once per block of its plane; a large output by non-temporal stores (see STREAM_FROM_BYTES) with
AVX-512. The portable loop's select is vectorised only with -fno-trapping-math (otherwise gcc keeps it scalar):
measured 2026-11-25 on an AMD EPYC Zen 3 (AVX2, 2 cores), 0.24x -> 3.12x over eager (scripts/bench_native.py)."""

import math

import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <math.h>
#include <stdint.h>
#define BLOCK 4096
#ifdef __AVX512F__
#include <immintrin.h>
#endif
/* An output of STREAM_FROM_BYTES or more whose planes are whole cache lines is written with non-temporal stores (as
   ops/batchnorm_inference's): beside its input it outgrows a 32 MiB last-level cache anyway, and streaming it saves
   the read of each output line that an ordinary store makes first (1.19x and 1.30x per round against ordinary
   stores, 260 MiB-L3 Intel VM, 2026-11-24, load 4). Each thread fences its streamed stores. */
#define STREAM_FROM_BYTES (16 << 20)
/* x is (batch, channels, plane) flattened; one OpenMP work item per BLOCK elements of one (sample, channel) plane. */
void leaky_relu_scale(const float* restrict x, const float* restrict bias, float* restrict out,
                      float slope, float scale, int64_t batch, int64_t channels, int64_t plane) {
    int64_t per_plane = (plane + BLOCK - 1) / BLOCK, items = batch * channels * per_plane;
    int stream = batch * channels * plane * (int64_t)sizeof(float) >= STREAM_FROM_BYTES && plane % 16 == 0
                 && ((uintptr_t)out & 63) == 0;
    (void)stream;
    #pragma omp parallel
    {
    #pragma omp for schedule(static) nowait
    for (int64_t it = 0; it < items; ++it) {
        int64_t bc = it / per_plane, c = bc % channels, start = bc * plane + (it % per_plane) * BLOCK;
        int64_t end = start + BLOCK < (bc + 1) * plane ? start + BLOCK : (bc + 1) * plane;
        float bc_bias = bias[c];
        int64_t i = start;
#ifdef __AVX512F__
        if (stream) {  /* planes and blocks are whole cache lines (BLOCK is a multiple of 16) */
            __m512 vb = _mm512_set1_ps(bc_bias), vslope = _mm512_set1_ps(slope), vscale = _mm512_set1_ps(scale);
            for (; i + 16 <= end; i += 16) {
                __m512 v = _mm512_add_ps(_mm512_loadu_ps(x + i), vb);  /* v > 0 ? v : v * slope, NaN to v * slope */
                __m512 r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_GT_OQ),
                                                _mm512_mul_ps(v, vslope), v);
                _mm512_stream_ps(out + i, _mm512_mul_ps(r, vscale));
            }
        }
#endif
        #pragma omp simd
        for (int64_t j = i; j < end; ++j) {
            float v = x[j] + bc_bias;
            out[j] = (v > 0.0f ? v : v * slope) * scale;
        }
    }
#ifdef __AVX512F__
    _mm_sfence();
#endif
    }
}
"""
lib = load_c("leaky_relu_scale", SOURCE, functions=["leaky_relu_scale"],
           flags=["-O3", "-march=native", "-fopenmp", "-fno-trapping-math"])


class ModelNew(nn.Module):
    def __init__(self, channels: int, negative_slope: float = 0.2, scale: float = math.sqrt(2.0)):
        super().__init__()
        self.negative_slope = negative_slope
        self.scale = scale
        self.bias = nn.Parameter(0.5 * torch.randn(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        batch, channels = x.shape[0], x.shape[1]
        lib.leaky_relu_scale(x, self.bias.contiguous(), out, self.negative_slope, self.scale, batch, channels,
                             x.numel() // (batch * channels))
        return out
