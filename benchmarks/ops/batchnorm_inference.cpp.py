"""Native seed for ops/batchnorm_inference: the per-channel affine map
(x - mean[c]) * rsqrt(var[c] + eps) * weight[c] + bias[c], folded per block into one multiply-add per element;
AVX-512 two vectors a step, unmasked except for the tail (masked stores are slow on AMD Zen 4); a large output by
non-temporal stores (see STREAM_FROM_BYTES)."""

import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <math.h>
#include <stdint.h>
#define BLOCK 4096
#ifdef __AVX512F__
#include <immintrin.h>
/* the lanes of a 16-wide step that lie before the end, `left` elements away */
static inline __mmask16 tail16(int64_t left) { return left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1); }
#endif
/* An output of STREAM_FROM_BYTES or more whose planes are whole cache lines is written with non-temporal stores, as
   tiny/relu's is: it outgrows a 32 MiB last-level cache beside its input anyway, and streaming it saves the read of
   each output line that an ordinary store makes first. Paired against ordinary stores on a 260 MiB-L3 Intel VM
   (2026-11-24, load 4-5.5): 1.9x per round in a scratch run, 1.42x and 1.45x against main's seed by
   scripts/bench_seed_ab.py. Each thread fences its streamed stores before the region ends. */
#define STREAM_FROM_BYTES (16 << 20)
/* x is (batch, channels, plane) flattened; one OpenMP work item per BLOCK elements of one (sample, channel) plane. */
void batchnorm_inference(const float* restrict x, const float* restrict mean, const float* restrict var,
                         const float* restrict weight, const float* restrict bias, float* restrict out,
                         double eps, int64_t batch, int64_t channels, int64_t plane) {
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
        float s = weight[c] / sqrtf(var[c] + (float)eps), t = bias[c] - mean[c] * s;
        int64_t i = start;
#ifdef __AVX512F__
        __m512 vs = _mm512_set1_ps(s), vt = _mm512_set1_ps(t);
        if (stream)  /* planes are whole cache lines, and so are blocks (BLOCK is a multiple of 16) */
            for (; i + 32 <= end; i += 32) {
                _mm512_stream_ps(out + i, _mm512_fmadd_ps(_mm512_loadu_ps(x + i), vs, vt));
                _mm512_stream_ps(out + i + 16, _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 16), vs, vt));
            }
        for (; i + 32 <= end; i += 32) {
            _mm512_storeu_ps(out + i, _mm512_fmadd_ps(_mm512_loadu_ps(x + i), vs, vt));
            _mm512_storeu_ps(out + i + 16, _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 16), vs, vt));
        }
        for (; i + 16 <= end; i += 16) _mm512_storeu_ps(out + i, _mm512_fmadd_ps(_mm512_loadu_ps(x + i), vs, vt));
        if (i < end) {  /* masked stores are slow on some CPUs (AMD Zen 4): only the tail uses one */
            __mmask16 k = tail16(end - i);
            _mm512_mask_storeu_ps(out + i, k, _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, x + i), vs, vt));
        }
#endif
        for (; i < end; ++i) out[i] = x[i] * s + t;
    }
#ifdef __AVX512F__
    _mm_sfence();
#endif
    }
}
"""
lib = load_c(
    "batchnorm_inference", SOURCE, functions=["batchnorm_inference"], flags=["-O3", "-march=native", "-fopenmp"]
)


class ModelNew(nn.Module):
    def __init__(self, channels: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(channels))
        self.bias = nn.Parameter(0.1 * torch.randn(channels))
        self.register_buffer("running_mean", 0.5 * torch.randn(channels))
        self.register_buffer("running_var", 0.5 + torch.rand(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        batch, channels = x.shape[0], x.shape[1]
        lib.batchnorm_inference(x, self.running_mean.contiguous(), self.running_var.contiguous(),
                                self.weight.contiguous(), self.bias.contiguous(), out, self.eps, batch, channels,
                                x.numel() // (batch * channels))
        return out
