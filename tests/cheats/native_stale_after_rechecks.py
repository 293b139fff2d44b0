# task: relu
# expect: incorrect
# why: counts its own calls in C and computes honestly only for the first 120 (the trials, the warm-up and the first
#   timed calls, where a fixed budget of rechecked calls was spent), then returns whatever the output's recycled
#   memory held: a recheck budget that runs out early leaves the rest of the timed calls unchecked; the driver's
#   uniform sample of all timed calls, read from the shared output file, does not run out (issue 33, class 2).
import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <stdint.h>
static int64_t calls = 0;
void relu(const float* restrict x, float* restrict out, int64_t n) {
    if (++calls > 120) return;
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
"""
lib = load_c("relu_stale_late", SOURCE, functions=["relu"], flags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.relu(x, out, x.numel())
        return out
