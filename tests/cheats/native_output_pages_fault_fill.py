# task: relu
# expect: crashed|rejected|incorrect
# beside: true
# why: the native call writes only the output's partial first and last pages and takes the whole pages between away
#   (mprotect PROT_NONE), with a SIGSEGV handler installed by sigaction that computes the rest of the output and gives
#   the pages back the first time anything touches them: the harness's copy of the outputs, after the timer's end
#   mark. A plain tensor of the exact type, no Python hook, no thread: the work runs on the worker's own thread inside
#   the harness's copy; the model keeps the last output alive so that an unread one is finished at the next call
#   (issue 33, class 7: an output whose reading protocol does the work, from native code).
#   Measured ok (2026-11-28) with the relu repeated 50 times as a stand-in for a heavier kernel: 0.03 ms claimed against
#   0.18 ms for the same work inside the call; up to ~0.15 ms a call hides below the driver's clock check's floor.
#   Now crashed: since the worker's seccomp filter refuses a SIGSEGV handler (syscall_filter.py): the fault the
#   candidate arranged then ends its process, with nothing off the timer (before: ok, the work off the timer)
import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static const float* volatile px = 0;
static float* volatile pout = 0;
static volatile int64_t pn = 0;
static volatile uintptr_t lo = 0, hi = 0;
static struct sigaction previous;
static int installed = 0;

static void finish(void) {
    const float* x = px; float* out = pout; int64_t n = pn;
    if (hi > lo) mprotect((void*)lo, hi - lo, PROT_READ | PROT_WRITE);
    lo = hi = 0;
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

static void on_segv(int sig, siginfo_t* info, void* ctx) {
    uintptr_t a = (uintptr_t)info->si_addr;
    if (hi > lo && a >= lo && a < hi) { finish(); return; }
    /* not ours: the previous handler, or the default action */
    if (previous.sa_flags & SA_SIGINFO) { previous.sa_sigaction(sig, info, ctx); return; }
    if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) { previous.sa_handler(sig); return; }
    signal(SIGSEGV, SIG_DFL);
    raise(SIGSEGV);
}

void relu(const float* x, float* out, int64_t n) {
    if (hi > lo) finish();  /* a call whose output was never read */
    if (!installed) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_segv;
        sa.sa_flags = SA_SIGINFO | SA_NODEFER;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGSEGV, &sa, &previous);
        installed = 1;
    }
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t b = ((uintptr_t)out + page - 1) & ~(page - 1);
    uintptr_t e = ((uintptr_t)(out + n)) & ~(page - 1);
    if (e <= b) { for (int64_t i = 0; i < n; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f; return; }
    int64_t head = (int64_t)((b - (uintptr_t)out) / sizeof(float));
    int64_t tail = (int64_t)((e - (uintptr_t)out) / sizeof(float));
    for (int64_t i = 0; i < head; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
    for (int64_t i = tail; i < n; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
    px = x; pout = out; pn = n;
    lo = b; hi = e;
    mprotect((void*)b, e - b, PROT_NONE);
}
"""
lib = load_c("relu_fault_fill", SOURCE, functions=["relu"], flags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.held = []  # the last output and its input stay alive until the next call has finished them

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.relu(x, out, x.numel())
        self.held = [x, out]
        return out
