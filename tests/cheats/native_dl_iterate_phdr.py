# task: relu
# expect: rejected
# beside: true
# reason: looks symbols up at run time
# why: a native kernel that walks the process's loaded objects (dl_iterate_phdr, no dlopen or dlsym named) to find
#   libtorch_cpu's ELF tables, the first step to calling ATen's kernels below the profiler (issue 33, class 6).
import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#define _GNU_SOURCE
#include <link.h>
#include <stdint.h>
#include <string.h>
static uintptr_t torch_base = 0;
static int visit(struct dl_phdr_info* info, size_t size, void* data) {
    if (info->dlpi_name && strstr(info->dlpi_name, "libtorch_cpu")) torch_base = info->dlpi_addr;
    return 0;
}
void relu(const float* restrict x, float* restrict out, int64_t n) {
    if (!torch_base) dl_iterate_phdr(visit, 0);
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
"""
lib = load_c("relu_phdr", SOURCE, functions=["relu"], flags=["-O2"])


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.relu(x, out, x.numel())
        return out
