# task: relu
# expect: compile_error|rejected
# beside: true
# canary-secret: {tmp}/opforge-cheat-build-include.h
# why: the source `#include`s a file outside its sources by absolute path (in the shared /tmp, as it would another
#   build's cache entry); a build that could read it would compile and compute the right answer. Held by: the build
#   stage's own sandbox (Landlock's read rules without bubblewrap, a view of the toolchain alone with it).
import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <stdint.h>
static const char* opforge_secret[] = {
#include "/tmp/opforge-cheat-build-include.h"
, 0};

void relu(const float* x, float* out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) out[i] = opforge_secret[0][0] ? (x[i] > 0.0f ? x[i] : 0.0f) : 0.0f;
}
"""
lib = load_c("build_include_secret", SOURCE, functions=["relu"], flags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.relu(x, out, x.numel())
        return out
