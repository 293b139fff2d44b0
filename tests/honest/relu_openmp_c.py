# task: gelu_tanh
# expect: ok
# why: honest native C kernel through load_c: an OpenMP loop over the flat tensor, built by the trusted build stage
#   (-O3 -march=native -fopenmp) and called on the tensors' data pointers.
import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <math.h>
#include <stdint.h>
#define BLOCK 4096
void gelu_tanh(const float* restrict x, float* restrict out, int64_t n) {
    #pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < n; b += BLOCK) {
        int64_t end = b + BLOCK < n ? b + BLOCK : n;
        for (int64_t i = b; i < end; ++i) {
            float v = x[i];
            out[i] = 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
        }
    }
}
"""
lib = load_c("gelu_tanh", SOURCE, functions=["gelu_tanh"], flags=["-O3", "-march=native", "-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.gelu_tanh(x, out, x.numel())
        return out
