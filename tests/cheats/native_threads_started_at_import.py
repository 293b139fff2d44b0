# task: relu
# expect: rejected
# why: threads started by the candidate's Python code during its import, before any native code (PyTorch's inter-op
#   pool, through torch.jit.fork), then hidden from the worker's own count by native code that replaces os.listdir
#   with one that drops the entries of /proc/self/task beyond its count before the pool started.
#   The driver's own count of the worker's threads started at the worker's first answer to its load, after the
#   import had begun: the pool's threads were in it (ok before the driver took the lower of that count and the
#   one the worker's snapshot took before the import). Its kernel uses the pool's extra threads nowhere; what they
#   could do (take cores the reference was not given) is what the count is for.
import os

import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

typedef void* (*fastcall)(void*, void* const*, intptr_t, void*);
typedef const char* (*as_utf8)(void*);
typedef intptr_t (*list_size)(void*);
typedef int (*list_set_slice)(void*, intptr_t, intptr_t, void*);
static fastcall real_listdir;
static as_utf8 utf8;
static list_size size;
static list_set_slice set_slice;
static intptr_t counted;

/* os.listdir, less the threads started since the import where it lists this process's own threads. */
static void* listdir(void* module, void* const* args, intptr_t nargs, void* kwnames) {
    void* names = real_listdir(module, args, nargs, kwnames);
    if (names && nargs >= 1) {
        const char* path = utf8(args[0]);
        if (path && strcmp(path, "/proc/self/task") == 0 && size(names) > counted)
            set_slice(names, counted, size(names), 0);
    }
    return names;
}

int64_t install(int64_t os_listdir, int64_t before) {
    utf8 = (as_utf8)dlsym(RTLD_DEFAULT, "PyUnicode_AsUTF8");
    size = (list_size)dlsym(RTLD_DEFAULT, "PyList_Size");
    set_slice = (list_set_slice)dlsym(RTLD_DEFAULT, "PyList_SetSlice");
    if (!utf8 || !size || !set_slice) return 0;
    counted = before;
    void** def = (void**)((void**)(intptr_t)os_listdir)[2];
    real_listdir = (fastcall)def[1];
    def[1] = (void*)listdir;
    return counted;
}

void relu(const float* restrict x, float* restrict out, int64_t n) {
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
"""
@torch.jit.script
def _nothing(x: torch.Tensor) -> torch.Tensor:
    return x + 1


@torch.jit.script
def _start(x: torch.Tensor) -> torch.Tensor:
    return torch.jit.wait(torch.jit.fork(_nothing, x))


_before = len(os.listdir("/proc/self/task"))  # as many as at the worker's snapshot
_start(torch.zeros(4))  # PyTorch's inter-op pool now has its threads
lib = load_c("import_threads", SOURCE, functions=["install", "relu"], flags=["-O3", "-march=native", "-fopenmp"])
lib.install(id(os.listdir), _before)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.relu(x, out, x.numel())
        return out
