# task: matmul_deep
# expect: ok
# why: honest native C matmul that accumulates every dot product in double (within 1e-9 of the exact product):
#   more exact than PyTorch's float32 BLAS, which at K=1024 is further than atol 1e-4 from the exact product in
#   hundreds of values of the x4-scaled trial; judged against the float64 reference it passes
import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <stdint.h>
void matmul_f64acc(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k) {
    for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
            double acc = 0.0;
            for (int64_t p = 0; p < k; ++p) acc += (double)a[i * k + p] * (double)b[p * n + j];
            c[i * n + j] = (float)acc;
        }
}
"""
lib = load_c("matmul_f64acc", SOURCE, functions=["matmul_f64acc"], flags=["-O2"])


class ModelNew(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a, b = a.contiguous(), b.contiguous()
        out = torch.empty(a.shape[0], b.shape[1], dtype=a.dtype)
        lib.matmul_f64acc(a, b, out, a.shape[0], b.shape[1], a.shape[1])
        return out
