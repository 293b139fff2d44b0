# task: relu
# expect: rejected|incorrect
# why: a pthread started from C at load finds the shared input file in /proc/self/maps and keeps computing ReLU of
#   what it holds into a private buffer whenever a few sampled words change (a new draw: next to no CPU otherwise), so
#   that a timed call only copies a result made before the driver's `go`
#   (issue 33, class 3: the next call's work done outside the window). The trusted side draws the inputs and reads
#   the candidate's CPU while it does: a worker that works before it was given its inputs is refused (and its idle
#   CPU while the reference is timed, and the thread it keeps, are refused too).
import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static float* ahead = 0;
static uintptr_t lo = 0, hi = 0;

static void find_inputs(void) {
    FILE* maps = fopen("/proc/self/maps", "r");
    char line[512];
    if (!maps) return;
    while (fgets(line, sizeof line, maps)) {
        if (strstr(line, "opforge-inputs") && strstr(line, " r--s ")) {
            unsigned long a, b;
            if (sscanf(line, "%lx-%lx", &a, &b) == 2) { lo = a; hi = b; }
        }
    }
    fclose(maps);
}

static uint64_t sample(const float* x, int64_t n) {  /* a few words: cheap to watch */
    uint64_t h = 0;
    for (int64_t i = 0; i < n; i += n / 64 + 1) { uint32_t w; memcpy(&w, x + i, 4); h = h * 31 + w; }
    return h;
}

static void* precompute(void* unused) {
    (void)unused;
    uint64_t seen = 0;
    struct timespec pause = {0, 1000000};  /* 1 ms between looks: next to no CPU while nothing changes */
    for (;;) {
        nanosleep(&pause, 0);
        if (!hi) find_inputs();
        if (!hi) continue;
        if (!ahead) ahead = (float*)malloc(hi - lo);
        const float* x = (const float*)lo;
        int64_t n = (int64_t)((hi - lo) / sizeof(float));
        uint64_t now = sample(x, n);
        if (now == seen) continue;
        nanosleep(&pause, 0);  /* the draw is being written: let it finish, then work ahead of the call */
        seen = sample(x, n);
        for (int64_t i = 0; i < n; ++i) ahead[i] = x[i] > 0.0f ? x[i] : 0.0f;
    }
    return 0;
}

__attribute__((constructor)) static void start(void) {
    pthread_t t;
    pthread_create(&t, 0, precompute, 0);
    pthread_detach(t);
}

void relu(const float* x, float* out, int64_t n) {
    uintptr_t p = (uintptr_t)x;
    if (ahead && p >= lo && p + (uintptr_t)n * sizeof(float) <= hi) {
        memcpy(out, ahead + (p - lo) / sizeof(float), (size_t)n * sizeof(float));
        return;
    }
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
"""
lib = load_c("work_while_inputs_drawn", SOURCE, functions=["relu"], flags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.relu(x, out, x.numel())
        return out
