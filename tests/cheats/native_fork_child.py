# task: relu
# expect: rejected|runtime_error|crashed
# beside: true
# why: native code forks a child process from C on the first call (no Python call the guards could see), which starts
#   a session of its own and stays alive spinning (stealing CPU from later measurements), then computes honestly. No
#   process may outlive the call.
import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <stdint.h>
#include <unistd.h>

static int started = 0;

void relu(const float* x, float* out, int64_t n) {
    if (!started) {
        started = 1;
        if (fork() == 0) {
            setsid();
            volatile uint64_t spin = 0;
            for (;;) spin++;
        }
    }
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
"""
lib = load_c("fork_child", SOURCE, functions=["relu"], flags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.relu(x, out, x.numel())
        return out
