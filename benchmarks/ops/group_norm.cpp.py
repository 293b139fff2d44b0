"""Native seed for ops/group_norm: one OpenMP iteration per (sample, group) block, which is contiguous
(C / G channels of H * W): its mean, then the variance of (x - mean) (two vectorised passes while the block is in
L2), then each channel's affine map folded into one multiply-add per element."""

import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <math.h>
#include <stdint.h>
#define CHUNK 16

void group_norm(const float* restrict x, const float* restrict w, const float* restrict b, float* restrict out,
                int64_t batch, int64_t channels, int64_t groups, int64_t plane, double eps) {
    int64_t per_group = channels / groups, block = per_group * plane;
    #pragma omp parallel for schedule(dynamic, CHUNK)
    for (int64_t bg = 0; bg < batch * groups; ++bg) {
        const float* restrict src = x + bg * block;
        float* restrict dst = out + bg * block;
        double sum = 0.0, sq = 0.0;
        #pragma omp simd reduction(+:sum)
        for (int64_t i = 0; i < block; ++i) sum += src[i];
        float mean = (float)(sum / (double)block);
        #pragma omp simd reduction(+:sq)
        for (int64_t i = 0; i < block; ++i) { float d = src[i] - mean; sq += d * d; }
        float rstd = 1.0f / sqrtf((float)(sq / (double)block) + (float)eps);
        for (int64_t cc = 0; cc < per_group; ++cc) {
            int64_t c = (bg % groups) * per_group + cc;
            float s = rstd * w[c], t = b[c] - mean * s;
            #pragma omp simd
            for (int64_t i = cc * plane; i < (cc + 1) * plane; ++i) dst[i] = src[i] * s + t;
        }
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
