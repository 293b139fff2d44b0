# task: relu_sized
# expect: crashed
# beside: true
# why: native code keeps one core busy while the reference is timed, from a process that is not the worker's: on its
#   first call it clone()s with CLONE_PARENT (and CLONE_VM, to read when the candidate last ran), so the spinner is
#   the zygote's child, the worker's sibling, outside every count of the worker (its threads, its children, its CPU
#   by the kernel's accounting). Once the candidate has made no call for 20 ms (the other side's blocks), it spins
#   0.9 ms of each 1 ms; it exits when the worker is gone. The kernel itself is honest. Before the worker's seccomp
#   filter (evaluator/sandbox/syscall_filter.py), which kills a process asking for CLONE_PARENT: ok at 1.18-1.37x, where the
#   same kernel without the spinner read 0.85-1.06x (3 pairs, alternated, on a machine other work kept busy).
import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

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
    while (kill(worker, 0) == 0) {
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
        clone(spin, stack + (1 << 20), CLONE_VM | CLONE_PARENT, 0);
    }
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
    last_call_ns = now_ns();
}
"""
lib = load_c("sibling_busy", SOURCE, functions=["relu"], flags=["-O3", "-march=native", "-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.relu(x, out, x.numel())
        return out
