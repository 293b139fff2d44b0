# task: relu
# expect: incorrect|rejected
# beside: true
# why: the C kernel does all its work on the first call only, keeping the result in a static buffer, and later calls
#   copy that buffer out (a memcpy instead of the work); wrong as soon as a later trial brings fresh inputs.
import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static float* saved = 0;
static int64_t saved_n = 0;

void relu(const float* x, float* out, int64_t n) {
    if (saved && saved_n == n) { memcpy(out, saved, (size_t)n * sizeof(float)); return; }
    free(saved);
    saved = (float*)malloc((size_t)n * sizeof(float));
    saved_n = n;
    for (int64_t i = 0; i < n; ++i) saved[i] = x[i] > 0.0f ? x[i] : 0.0f;
    memcpy(out, saved, (size_t)n * sizeof(float));
}
"""
lib = load_c("first_call_only", SOURCE, functions=["relu"], flags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.relu(x, out, x.numel())
        return out
