"""Native seed for ops/relu_backward: grad_output where x > 0, else 0, in one vectorised pass."""

import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <math.h>
#include <stdint.h>
#define BLOCK 4096
void relu_backward(const float* restrict dy, const float* restrict x, float* restrict out, int64_t n) {
    int64_t blocks = (n + BLOCK - 1) / BLOCK;
    #pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < blocks; ++b) {
        int64_t end = (b + 1) * BLOCK < n ? (b + 1) * BLOCK : n;
        #pragma omp simd
        for (int64_t i = b * BLOCK; i < end; ++i) {
            out[i] = x[i] > 0.0f ? dy[i] : 0.0f;
        }
    }
}
"""
lib = load_c("relu_backward", SOURCE, functions=["relu_backward"], flags=["-O3", "-march=native", "-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, grad_output: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        grad_output, x = grad_output.contiguous(), x.contiguous()
        out = torch.empty_like(grad_output)
        lib.relu_backward(grad_output, x, out, x.numel())
        return out
