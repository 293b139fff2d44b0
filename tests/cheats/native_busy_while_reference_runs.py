# task: relu_sized
# expect: rejected
# why: native code keeps one core busy while the reference is timed, so the reference runs slower and the candidate's
#   speedup rises: a 1 ms SIGALRM timer whose handler, once the candidate has made no call for 20 ms (the other side's
#   blocks), spins 0.9 ms of each tick on whichever thread the signal lands on (no new thread to count). The worker's
#   own check of its CPU while idle reads time.process_time, whose C function it replaces with one that leaves the
#   spinning out. The kernel itself is honest. Before the fix: ok at 1.04-1.19x, where the same kernel without the
#   spinning read 0.83-1.08x (alternated, on a machine other work kept busy); the driver's meter of other work counts
#   the evaluation's own processes as its own, not as other work.
import time

import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <sys/time.h>
#include <time.h>

typedef void* (*from_double)(double);
static from_double make_float;
static volatile int64_t last_call_ns;
static int64_t spun_ns;

static int64_t read_ns(clockid_t which) {
    struct timespec ts;
    clock_gettime(which, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int spinning;

static void tick(int sig) {
    (void)sig;
    int64_t now = read_ns(CLOCK_MONOTONIC);
    if (now - last_call_ns < 20000000 || __atomic_exchange_n(&spinning, 1, __ATOMIC_ACQUIRE)) return;
    int64_t cpu0 = read_ns(CLOCK_THREAD_CPUTIME_ID);
    volatile double x = 0.0;
    while (read_ns(CLOCK_MONOTONIC) < now + 900000) x += 1.0;
    __atomic_add_fetch(&spun_ns, read_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0, __ATOMIC_RELAXED);
    __atomic_store_n(&spinning, 0, __ATOMIC_RELEASE);
}

/* time.process_time without the spinning: a METH_NOARGS function returning a Python float. */
static void* quiet_process_time(void* self, void* unused) {
    (void)self; (void)unused;
    return make_float((double)(read_ns(CLOCK_PROCESS_CPUTIME_ID) - __atomic_load_n(&spun_ns, __ATOMIC_RELAXED)) / 1e9);
}

int64_t install(int64_t process_time) {
    make_float = (from_double)dlsym(RTLD_DEFAULT, "PyFloat_FromDouble");
    if (!make_float) return 0;
    void** def = (void**)((void**)(intptr_t)process_time)[2];
    def[1] = (void*)quiet_process_time;
    struct sigaction sa = {0};
    sa.sa_handler = tick;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, 0);
    struct itimerval every = {{0, 1000}, {0, 1000}};
    setitimer(ITIMER_REAL, &every, 0);
    return 1;
}

void relu(const float* restrict x, float* restrict out, int64_t n) {
    last_call_ns = read_ns(CLOCK_MONOTONIC);
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
    last_call_ns = read_ns(CLOCK_MONOTONIC);
}
"""
lib = load_c("busy_elsewhere", SOURCE, functions=["install", "relu"], flags=["-O3", "-march=native", "-fopenmp"])
lib.install(id(time.process_time))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.relu(x, out, x.numel())
        return out
