# task: relu
# expect: rejected
# beside: true
# reason: looks symbols up at run time
# why: a load_c library that finds PyTorch's own code at run time (dlopen of libtorch_cpu with RTLD_NOLOAD, then
#   dlsym of an ATen entry point) and calls it from C: PyTorch's work below the profiler's view, as a "native kernel".
#   Here it only looks (a kernel calling what it found would do the same look-up first).
import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
static void* found = 0;
void relu(const float* restrict x, float* restrict out, int64_t n) {
    if (!found) {
        void* lib = dlopen("libtorch_cpu.so", RTLD_NOW | RTLD_NOLOAD);
        found = lib ? dlsym(lib, "_ZN2at6native4reluERKNS_6TensorE") : (void*)1;
    }
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
"""
lib = load_c("relu_dlsym", SOURCE, functions=["relu"], flags=["-O2"])


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.relu(x, out, x.numel())
        return out
