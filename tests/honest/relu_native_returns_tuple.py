# task: relu
# expect: ok
# why: honest native C ReLU whose forward returns a plain one-element tuple holding its output (the shape of a
#   multi-output module's result), built through a list: a container the harness unpacks itself, with nothing
#   deferred into it
import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <stdint.h>
void relu(const float* restrict x, float* restrict out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
"""
lib = load_c("relu_tuple_result", SOURCE, functions=["relu"], flags=["-O3"])


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        outs = []
        out = torch.empty_like(x)
        lib.relu(x, out, x.numel())
        outs.append(out)
        return tuple(outs)
