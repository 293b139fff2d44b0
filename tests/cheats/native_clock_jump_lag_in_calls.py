# task: poly_sized
# expect: rejected
# config: max_timing_s=2.0
# reason: rewrote machine code
# why: native code overwrites the C library's clock_gettime with a jump to its own clock (mprotect, then a movabs and
#   a jmp: no dlsym, no signal handler, no Python symbol), which reads the time by the raw syscall and falls behind
#   during the kernel's calls alone, so the worker's timer claims less than each call took while keeping time when the
#   worker waits (the driver's read-it-twice check passes). The kernel makes nine passes, about PyTorch's time, so
#   that its claim is a speedup above 1. Measured with a 12% lag before the driver read the worker's code pages
#   (2026-11-29, scripts/bench_remainders.py, 5 runs, outputs still copied): ok every time at 0.91-1.29x, its
#   per-call remainder within the clock check's allowance, which could not be cut without refusing honest seeds.
#   Since outputs are read from the worker's memory, the clock check (5% of the call) refuses a 12% lag too; the lag
#   here is 4%, within it, so that this case tests what closes the route whatever its size: the patched page of libc
#   is the process's own copy in the kernel's map (`verify/code_pages.py`).
import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#define _GNU_SOURCE
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static volatile int64_t lag_ns;

static int64_t raw_ns(void) {
    struct timespec ts;
    syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int lagging(clockid_t id, struct timespec* ts) {
    long rc = syscall(SYS_clock_gettime, id, ts);
    if (rc == 0 && id == CLOCK_MONOTONIC) {
        int64_t t = (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec - lag_ns;
        ts->tv_sec = t / 1000000000;
        ts->tv_nsec = t % 1000000000;
    }
    return (int)rc;
}

int64_t install(void) {
    unsigned char* at = (unsigned char*)(void*)&clock_gettime;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    void* base = (void*)((uintptr_t)at & ~(page - 1));
    if (mprotect(base, 2 * page, PROT_READ | PROT_WRITE | PROT_EXEC) != 0) return 0;
    uint64_t target = (uint64_t)(uintptr_t)&lagging;
    unsigned char jump[12] = {0x48, 0xB8, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xE0};  /* movabs rax, target; jmp rax */
    memcpy(jump + 2, &target, 8);
    memcpy(at, jump, sizeof jump);
    mprotect(base, 2 * page, PROT_READ | PROT_EXEC);
    return 1;
}

void poly(const float* restrict x, float* restrict out, int64_t n) {
    int64_t t0 = raw_ns();
    for (int pass = 0; pass < 9; ++pass) {
        #pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; ++i) out[i] = (x[i] > 0.0f ? x[i] : 0.0f) * 2.0f + x[i] * x[i] - 1.0f;
    }
    lag_ns += (raw_ns() - t0) * 4 / 100;
}
"""
lib = load_c("jump_lagging_clock", SOURCE, functions=["install", "poly"],
             flags=["-O3", "-march=native", "-fopenmp", "-fno-trapping-math"])
lib.install()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.poly(x, out, x.numel())
        return out
