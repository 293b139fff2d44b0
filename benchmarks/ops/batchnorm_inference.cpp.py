"""Native seed for ops/batchnorm_inference: the per-channel affine map
(x - mean[c]) * rsqrt(var[c] + eps) * weight[c] + bias[c], folded per block into one multiply-add per element."""

import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <math.h>
#include <stdint.h>
#define BLOCK 4096
/* x is (batch, channels, plane) flattened; one OpenMP work item per BLOCK elements of one (sample, channel) plane. */
void batchnorm_inference(const float* restrict x, const float* restrict mean, const float* restrict var,
                         const float* restrict weight, const float* restrict bias, float* restrict out,
                         double eps, int64_t batch, int64_t channels, int64_t plane) {
    int64_t per_plane = (plane + BLOCK - 1) / BLOCK, items = batch * channels * per_plane;
    #pragma omp parallel for schedule(static)
    for (int64_t it = 0; it < items; ++it) {
        int64_t bc = it / per_plane, c = bc % channels, start = bc * plane + (it % per_plane) * BLOCK;
        int64_t end = start + BLOCK < (bc + 1) * plane ? start + BLOCK : (bc + 1) * plane;
        float s = weight[c] / sqrtf(var[c] + (float)eps), t = bias[c] - mean[c] * s;
        #pragma omp simd
        for (int64_t i = start; i < end; ++i) {
            out[i] = x[i] * s + t;
        }
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
