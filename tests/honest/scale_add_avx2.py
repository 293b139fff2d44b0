# task: scale_add
# expect: ok
# why: honest native C kernel with SIMD intrinsics (AVX2 + FMA, -mavx2 -mfma): eight floats at a time with
#   _mm256_fmadd_ps, a scalar loop for the tail.
import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <immintrin.h>
#include <stdint.h>
void scale_add(const float* restrict x, const float* restrict y, float* restrict out, int64_t n) {
    const __m256 two = _mm256_set1_ps(2.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), two, _mm256_loadu_ps(y + i));
        _mm256_storeu_ps(out + i, v);
    }
    for (; i < n; ++i) out[i] = x[i] * 2.0f + y[i];
}
"""
lib = load_c("scale_add_avx2", SOURCE, functions=["scale_add"], flags=["-O2", "-mavx2", "-mfma"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        x, y = x.contiguous(), y.contiguous()
        out = torch.empty_like(x)
        lib.scale_add(x, y, out, x.numel())
        return out
