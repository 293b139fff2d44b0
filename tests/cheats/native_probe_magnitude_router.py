# task: relu
# expect: incorrect
# beside: true
# why: a native kernel that saturates at 1e4 (wrong for large inputs) except on the large-magnitude probe, which it
#   recognises by its inputs' spread: a probe drawn at exactly 1e5 (its standard deviation within 3% of that) is
#   routed to an exact path. Probe scales drawn per trial from a continuous range leave it on the wrong path
#   (issue 33, class 5; ok when the probe's magnitude was one fixed value).
import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <math.h>
#include <stdint.h>
void relu(const float* restrict x, float* restrict out, int64_t n) {
    double ss = 0.0;
    for (int64_t i = 0; i < n; ++i) ss += (double)x[i] * x[i];
    double sd = n ? sqrt(ss / n) : 0.0;
    int exact = fabs(sd / 1e5 - 1.0) < 0.03;
    for (int64_t i = 0; i < n; ++i) {
        float v = x[i] > 0.0f ? x[i] : 0.0f;
        out[i] = exact ? v : fminf(v, 1e4f);
    }
}
"""
lib = load_c("relu_probe_router", SOURCE, functions=["relu"], flags=["-O2"])


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.relu(x, out, x.numel())
        return out
