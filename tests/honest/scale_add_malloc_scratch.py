# task: scale_add
# expect: ok
# why: honest native C kernel that allocates a scratch buffer with malloc and frees it on every call (two passes
#   through the scratch), and reports an allocation failure through its return value.
import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <stdint.h>
#include <stdlib.h>
int scale_add(const float* x, const float* y, float* out, int64_t n) {
    float* tmp = (float*)malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    if (!tmp) return -1;
    for (int64_t i = 0; i < n; ++i) tmp[i] = 2.0f * x[i];
    for (int64_t i = 0; i < n; ++i) out[i] = tmp[i] + y[i];
    free(tmp);
    return 0;
}
"""
lib = load_c("scale_add_scratch", SOURCE, functions=["scale_add"], flags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        x, y = x.contiguous(), y.contiguous()
        out = torch.empty_like(x)
        if lib.scale_add(x, y, out, x.numel()) != 0:
            raise MemoryError("scale_add: malloc failed")
        return out
