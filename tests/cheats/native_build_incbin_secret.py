# task: relu
# expect: compile_error|rejected
# beside: true
# canary-secret: {tmp}/opforge-cheat-build-secret
# why: the source has the build stage's assembler read a file outside its sources (`.incbin` of a file in the shared
#   /tmp, as it would another build's cache entry or the store), and an `#include` of the same file; a build that
#   could read it would compile and compute the right answer. Held by: the build stage's own sandbox (Landlock's
#   read rules and the syscall filter without bubblewrap, a view of the toolchain alone with it).
import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <stdint.h>
__asm__(".section .rodata\n"
        ".globl opforge_secret\n"
        "opforge_secret:\n"
        ".incbin \"/tmp/opforge-cheat-build-secret\"\n"
        ".byte 0\n"
        ".text\n");
extern const char opforge_secret[];

void relu(const float* x, float* out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) out[i] = opforge_secret[0] ? (x[i] > 0.0f ? x[i] : 0.0f) : 0.0f;
}
"""
lib = load_c("build_incbin_secret", SOURCE, functions=["relu"], flags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.relu(x, out, x.numel())
        return out
