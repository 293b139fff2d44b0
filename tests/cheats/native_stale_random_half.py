# task: relu
# expect: incorrect
# why: after its first 40 calls (the correctness trials and the start of timing) a native kernel skips the work in a
#   random half of its calls, returning whatever the output's recycled memory held: the median call is the cheap one.
#   A uniform sample of six of the timed calls, read by the driver from the shared output file, misses every stale
#   one with odds of 2**-6 (issue 33, class 2).
import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <stdint.h>
#include <stdlib.h>
static int64_t calls = 0;
static unsigned state = 12345u;
void relu(const float* restrict x, float* restrict out, int64_t n) {
    state = state * 1103515245u + 12345u;
    if (++calls > 40 && (state >> 16) & 1u) return;
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
"""
lib = load_c("relu_stale_half", SOURCE, functions=["relu"], flags=["-O2"])


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.relu(x, out, x.numel())
        return out
