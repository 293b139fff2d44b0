# task: relu
# expect: rejected|incorrect
# beside: true
# why: the int3 hook of native_int3_libc_hook_after_timer.py planted without mprotect: the trap bytes are written into
#   the C library's code through /proc/self/mem (which writes through the pages' protection), so a filter on
#   mprotect(PROT_EXEC) alone does not stop it; a SIGTRAP handler does the work on the first malloc after the
#   timer's end mark and takes the traps out (issue 33, class 7)
import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

static unsigned char* volatile armed_at = 0;
static unsigned char saved = 0;
static volatile int stage = 0;  /* 1: trap on clock_gettime armed, 2: trap on malloc armed */
static const float* volatile px = 0;
static float* volatile pout = 0;
static volatile int64_t pn = 0;
static int installed = 0;

static int mem = -1;

static void poke(unsigned char* p, unsigned char v) {  /* /proc/self/mem writes through the page protection */
    if (mem < 0) mem = open("/proc/self/mem", O_RDWR);
    pwrite(mem, &v, 1, (off_t)(uintptr_t)p);
}

static void plant(unsigned char* p) {
    saved = *p;
    armed_at = p;
    __sync_synchronize();
    poke(p, 0xCC);
}

static void unplant(void) {
    if (armed_at) { poke(armed_at, saved); armed_at = 0; __sync_synchronize(); }
}

static void compute(void) {
    const float* x = px; float* out = pout; int64_t n = pn;
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
    pn = 0;
}

static void on_trap(int sig, siginfo_t* info, void* ctx) {
    (void)sig; (void)info;
    ucontext_t* uc = (ucontext_t*)ctx;
    unsigned char* at = armed_at;
    unplant();
    uc->uc_mcontext.gregs[REG_RIP] = (greg_t)at;  /* run the real first instruction */
    if (stage == 1) {
        stage = 2;
        plant((unsigned char*)(void*)&malloc);
    } else {
        stage = 0;
        compute();
    }
}

void relu(const float* x, float* out, int64_t n) {
    if (stage) { unplant(); stage = 0; compute(); }
    if (!installed) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_trap;
        sa.sa_flags = SA_SIGINFO;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGTRAP, &sa, 0);
        installed = 1;
    }
    px = x; pout = out; pn = n;
    stage = 1;
    plant((unsigned char*)(void*)&clock_gettime);
}
"""
lib = load_c("relu_int3_proc_mem", SOURCE, functions=["relu"], flags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.held = []

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.relu(x, out, x.numel())
        self.held = [x, out]
        return out
