# task: poly_iterated
# expect: ok
# why: an honest fused native kernel against a reference of 800 operators a call: blocks of 64 elements stay in
#   registers through the 400 steps (multiply, then add, each rounded as PyTorch rounds them: no contraction into an
#   FMA), split across threads with OpenMP. Its claim is what it runs, so the driver's per-call remainder check
#   (`clock_checks.call_gap`, 3% of the call beyond the floor and noise) must accept it even though the reference's
#   worker records 800 operators a call in its profiler.
import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <stdint.h>
#define BLOCK 64
void poly(const float* restrict x, float* restrict out, int64_t n, int64_t steps) {
    #pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < n; b += BLOCK) {
        float v[BLOCK] = {0};
        int64_t m = n - b < BLOCK ? n - b : BLOCK;
        for (int64_t j = 0; j < m; ++j) v[j] = x[b + j];
        for (int64_t s = 0; s < steps; ++s)
            for (int64_t j = 0; j < BLOCK; ++j) v[j] = v[j] * 0.999f + 0.001f;
        for (int64_t j = 0; j < m; ++j) out[b + j] = v[j];
    }
}
"""
lib = load_c("poly_iterated", SOURCE, functions=["poly"],
             flags=["-O3", "-march=native", "-fopenmp", "-ffp-contract=off"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.poly(x, out, x.numel(), 400)
        return out
