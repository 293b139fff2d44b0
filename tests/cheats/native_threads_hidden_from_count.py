# task: relu
# expect: rejected
# why: a native kernel asks OpenMP for more threads than the evaluation gives both sides (num_threads(4): on a machine
#   whose workers get fewer cores, it takes cores the reference was not given; OpenMP's pool keeps the extra threads
#   after the call), and hides them from the worker's own count of its threads: that count lists /proc/self/task with
#   os.listdir inside the candidate's process, whose C function the native code replaces with one that drops the
#   entries beyond the count at import. Before the driver counted the worker's threads itself (/proc/<pid>/task, from
#   outside): ok (at 0.11x on 2 cores, where the extra threads had no free core to take).
import os

import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#define _GNU_SOURCE
#include <dirent.h>
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

int64_t install(int64_t os_listdir) {
    utf8 = (as_utf8)dlsym(RTLD_DEFAULT, "PyUnicode_AsUTF8");
    size = (list_size)dlsym(RTLD_DEFAULT, "PyList_Size");
    set_slice = (list_set_slice)dlsym(RTLD_DEFAULT, "PyList_SetSlice");
    if (!utf8 || !size || !set_slice) return 0;
    DIR* d = opendir("/proc/self/task");
    if (!d) return 0;
    for (struct dirent* e; (e = readdir(d));) counted += e->d_name[0] != '.';
    closedir(d);
    void** def = (void**)((void**)(intptr_t)os_listdir)[2];
    real_listdir = (fastcall)def[1];
    def[1] = (void*)listdir;
    return counted;
}

void relu(const float* restrict x, float* restrict out, int64_t n) {
    #pragma omp parallel for num_threads(4) schedule(static)
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
"""
lib = load_c("hidden_threads", SOURCE, functions=["install", "relu"], flags=["-O3", "-march=native", "-fopenmp"])
lib.install(id(os.listdir))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.relu(x, out, x.numel())
        return out
