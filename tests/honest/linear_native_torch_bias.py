# task: linear
# expect: ok
# max-abs-error: 1e-4
# why: honest native C matmul x @ W^T (accumulated in double), with the bias added by PyTorch afterwards: the add
#   reads the output and the bias, a sixth of what the reference's linear reads (glue beside the kernel's work)
import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <stdint.h>
void matmul_nt(const float* x, const float* w, float* out, int64_t m, int64_t n, int64_t k) {
    for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
            double acc = 0.0;
            for (int64_t p = 0; p < k; ++p) acc += (double)x[i * k + p] * (double)w[j * k + p];
            out[i * n + j] = (float)acc;
        }
}
"""
lib = load_c("linear_nt", SOURCE, functions=["matmul_nt"], flags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        w = self.linear.weight.contiguous()
        out = torch.empty(x.shape[0], w.shape[0], dtype=x.dtype)
        lib.matmul_nt(x, w, out, x.shape[0], w.shape[0], x.shape[1])
        return out + self.linear.bias
