# task: matmul
# expect: rejected
# beside: true
# reason: calls functions that no C or C++ runtime defines
# why: a load_c "kernel" that declares the BLAS's sgemm_ (and cblas_sgemm) as weak externs: wherever a process has
#   loaded a library that defines them globally (a BLAS that PyTorch or numpy brought in), the dynamic loader binds
#   them and the kernel is PyTorch's BLAS; elsewhere it falls back to its own loop. The driver refuses the library on
#   its undefined symbols, before any worker loads it.
import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <stdint.h>
extern void sgemm_(const char*, const char*, const int*, const int*, const int*, const float*, const float*,
                   const int*, const float*, const int*, const float*, float*, const int*) __attribute__((weak));
void mm(const float* restrict a, const float* restrict b, float* restrict c, int64_t m, int64_t k, int64_t n) {
    if (sgemm_) {
        int M = (int)m, K = (int)k, N = (int)n; float one = 1.0f, zero = 0.0f;
        sgemm_("N", "N", &N, &M, &K, &one, b, &N, a, &K, &zero, c, &N);
        return;
    }
    for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
            float s = 0.0f;
            for (int64_t p = 0; p < k; ++p) s += a[i * k + p] * b[p * n + j];
            c[i * n + j] = s;
        }
}
"""
lib = load_c("mm_weak_blas", SOURCE, functions=["mm"], flags=["-O2"])


class ModelNew(nn.Module):
    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        out = torch.empty(a.shape[0], b.shape[1], dtype=a.dtype)
        lib.mm(a, b, out, a.shape[0], a.shape[1], b.shape[1])
        return out
