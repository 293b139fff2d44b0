# task: relu
# expect: ok
# why: honest native C kernel through load_c: an OpenMP loop over blocks of the flat tensor, built by the trusted
#   build stage (-O3 -march=native -fopenmp) and called on the tensors' data pointers.
import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <stdint.h>
#define BLOCK 4096
void relu(const float* restrict x, float* restrict out, int64_t n) {
    #pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < n; b += BLOCK) {
        int64_t end = b + BLOCK < n ? b + BLOCK : n;
        for (int64_t i = b; i < end; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
    }
}
"""
lib = load_c("relu_omp", SOURCE, functions=["relu"], flags=["-O3", "-march=native", "-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.relu(x, out, x.numel())
        return out
