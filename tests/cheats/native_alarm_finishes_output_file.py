# task: relu_sized
# expect: incorrect|rejected
# why: a native kernel computes the first half of its output and arms a 0.3 ms timer whose signal handler finds the
#   driver's shared output file in /proc/self/maps and writes the second half straight into it, after the call's
#   reply: the call's window holds half the work, and the bytes the driver reads are complete if the handler wins the
#   race. The driver reads them while the worker must be idle and sees its CPU (the quiet window), or reads them
#   unfinished (issue 33, classes 1 and 4).
import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
static const float* pending_x = 0;
static int64_t pending_n = 0;
static float* find_file(void) {
    FILE* maps = fopen("/proc/self/maps", "r");
    char line[512];
    unsigned long lo = 0, hi = 0;
    float* found = 0;
    while (maps && fgets(line, sizeof line, maps))
        if (strstr(line, "opforge-outputs") && sscanf(line, "%lx-%lx", &lo, &hi) == 2) found = (float*)lo;
    if (maps) fclose(maps);
    return found;
}
static void finish(int sig) {
    float* file = find_file();
    if (!file || !pending_x) return;
    for (int64_t i = pending_n / 2; i < pending_n; ++i) file[i] = pending_x[i] > 0.0f ? pending_x[i] : 0.0f;
}
void relu(const float* restrict x, float* restrict out, int64_t n) {
    static int armed = 0;
    if (!armed) { signal(SIGALRM, finish); armed = 1; }
    for (int64_t i = 0; i < n / 2; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
    pending_x = x;
    pending_n = n;
    struct itimerval t = {{0, 0}, {0, 300}};
    setitimer(ITIMER_REAL, &t, 0);
}
"""
lib = load_c("relu_alarm_file", SOURCE, functions=["relu"], flags=["-O2"])


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.relu(x, out, x.numel())
        return out
