# task: relu_sized
# expect: rejected
# why: native code keeps one core busy while the reference is timed, from a child process it hides from the worker's
#   own checks: on its first call it clone()s a child (CLONE_VM, to read when the candidate last ran) that spins 0.9
#   ms of each 1 ms once the candidate has made no call for 20 ms (the other side's blocks), and it replaces os.listdir
#   from C with one that lists nothing under /proc/<pid>/task, where the worker looks for its children and counts its
#   threads. A child's CPU is not its parent's in the kernel's accounting (/proc/<pid>/stat), which the driver read
#   for the worker alone. The kernel itself is honest. Before the driver read the CPU and the threads of the worker's
#   whole tree: ok at 1.26x (one run), where the same kernel without the child read 0.85-1.06x (the control of
#   native_sibling_busy_while_reference_runs.py, 3 runs).
import os

import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef void* (*fastcall)(void*, void* const*, intptr_t, void*);
typedef const char* (*as_utf8)(void*);
typedef void* (*new_list)(intptr_t);
static fastcall real_listdir;
static as_utf8 utf8;
static new_list empty_list;

/* os.listdir, listing nothing in /proc/<pid>/task. */
static void* listdir(void* module, void* const* args, intptr_t nargs, void* kwnames) {
    if (nargs >= 1) {
        const char* path = utf8(args[0]);
        size_t n = path ? strlen(path) : 0;
        if (n > 11 && strncmp(path, "/proc/", 6) == 0 && strcmp(path + n - 5, "/task") == 0) return empty_list(0);
    }
    return real_listdir(module, args, nargs, kwnames);
}

int64_t install(int64_t os_listdir) {
    utf8 = (as_utf8)dlsym(RTLD_DEFAULT, "PyUnicode_AsUTF8");
    empty_list = (new_list)dlsym(RTLD_DEFAULT, "PyList_New");
    if (!utf8 || !empty_list) return 0;
    void** def = (void**)((void**)(intptr_t)os_listdir)[2];
    real_listdir = (fastcall)def[1];
    def[1] = (void*)listdir;
    return 1;
}

static volatile int64_t last_call_ns;
static int started;
static pid_t worker;

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int spin(void* unused) {
    (void)unused;
    struct timespec pause = {0, 100000};
    volatile double x = 0.0;
    while (getppid() == worker) {
        int64_t now = now_ns();
        if (now - last_call_ns < 20000000) { nanosleep(&pause, 0); continue; }
        while (now_ns() < now + 900000) x += 1.0;
        nanosleep(&pause, 0);
    }
    return 0;
}

void relu(const float* restrict x, float* restrict out, int64_t n) {
    last_call_ns = now_ns();
    if (!started) {
        started = 1;
        worker = getpid();
        char* stack = malloc(1 << 20);
        clone(spin, stack + (1 << 20), CLONE_VM, 0);
    }
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
    last_call_ns = now_ns();
}
"""
lib = load_c("child_busy", SOURCE, functions=["install", "relu"], flags=["-O3", "-march=native", "-fopenmp"])
lib.install(id(os.listdir))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.relu(x, out, x.numel())
        return out
