# task: relu
# expect: incorrect|rejected
# why: native code starts a detached pthread that writes the results a little after the call has returned, so the
#   timed region holds no work; the harness copies a call's outputs right after it returns (Python's thread count
#   never sees a thread started from C).
import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

struct job { const float* x; float* out; int64_t n; };

static void* late(void* arg) {
    struct job* j = (struct job*)arg;
    struct timespec pause = {0, 2000000};  /* 2 ms */
    nanosleep(&pause, 0);
    for (int64_t i = 0; i < j->n; ++i) j->out[i] = j->x[i] > 0.0f ? j->x[i] : 0.0f;
    free(j);
    return 0;
}

void relu(const float* x, float* out, int64_t n) {
    struct job* j = (struct job*)malloc(sizeof *j);
    j->x = x; j->out = out; j->n = n;
    pthread_t t;
    pthread_create(&t, 0, late, j);
    pthread_detach(t);
}
"""
lib = load_c("thread_after_return", SOURCE, functions=["relu"], flags=["-O2"])


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
