# task: relu
# expect: incorrect
# beside: true
# why: native code remembers the input's address and size and skips the work when a call brings the same address
#   again (the allocator hands the same block back to fresh inputs of the same size), returning the output buffer it
#   kept from the last call. Stale as soon as new values arrive in the same memory.
import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <stdint.h>

static const float* last_x = 0;
static int64_t last_n = -1;

int64_t relu(const float* x, float* out, int64_t n, int64_t fresh_out) {
    if (!fresh_out && x == last_x && n == last_n) return 0;  /* cache hit: out still holds the last result */
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
    last_x = x; last_n = n;
    return 1;
}
"""
lib = load_c("cache_by_address", SOURCE, functions=["relu"], flags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.out = None

    def forward(self, x):
        x = x.contiguous()
        fresh = self.out is None or self.out.shape != x.shape
        if fresh:
            self.out = torch.empty_like(x)
        lib.relu(x, self.out, x.numel(), int(fresh))
        return self.out
