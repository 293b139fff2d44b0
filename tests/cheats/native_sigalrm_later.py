# task: relu
# expect: incorrect|rejected
# why: native code installs a SIGALRM handler with sigaction and arms a 3 ms timer, then returns at once; the handler
#   writes the results later, on the same thread, in the middle of whatever the harness does next (outside the timed
#   region).
import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/time.h>

static const float* volatile pending_x;
static float* volatile pending_out;
static volatile int64_t pending_n;

static void finish(int sig) {
    (void)sig;
    for (int64_t i = 0; i < pending_n; ++i) pending_out[i] = pending_x[i] > 0.0f ? pending_x[i] : 0.0f;
}

void relu(const float* x, float* out, int64_t n) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = finish;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, 0);
    pending_x = x; pending_out = out; pending_n = n;
    struct itimerval later = {{0, 0}, {0, 3000}};
    setitimer(ITIMER_REAL, &later, 0);
}
"""
lib = load_c("sigalrm_later", SOURCE, functions=["relu"], flags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.alive = []  # every input and output stays allocated, so the late writes never land in freed memory

    def forward(self, x):
        x = x.contiguous()
        out = torch.zeros_like(x)
        self.alive.append((x, out))
        lib.relu(x, out, x.numel())
        return out
