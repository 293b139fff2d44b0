# task: relu
# expect: rejected
# why: a native kernel asks OpenMP for more threads than the evaluation gives both sides (num_threads(8) on a machine
#   whose workers get its cores): on a machine with more cores than the worker's share, it would take cores the
#   reference was not given. OpenMP's pool keeps the extra threads after the call, so the process's OS thread count
#   says so; Python's thread count never sees threads started from C.
import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <stdint.h>
void relu(const float* restrict x, float* restrict out, int64_t n) {
    #pragma omp parallel for num_threads(8) schedule(static)
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
"""
lib = load_c("more_threads", SOURCE, functions=["relu"], flags=["-O3", "-march=native", "-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.relu(x, out, x.numel())
        return out
