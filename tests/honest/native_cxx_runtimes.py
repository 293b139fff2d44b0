# task: relu
# expect: ok
# why: honest native C++ kernel that leans on the C and C++ runtimes the symbol check allows (issue 33, class 6):
#   std::vector scratch, std::sort of a small table, <cmath>'s std::fmax, std::atomic, libgomp's OpenMP loop and
#   libc's memcpy; the driver reads its undefined symbols and finds each in a runtime, none in PyTorch.
import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>
static std::atomic<int64_t> calls{0};
extern "C" void relu(const float* __restrict x, float* __restrict out, int64_t n) {
    calls.fetch_add(1, std::memory_order_relaxed);
    std::vector<float> zero(4, 0.0f);
    std::sort(zero.begin(), zero.end());
    const int64_t block = 4096;
    #pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < n; b += block) {
        float tmp[4096];
        const int64_t len = std::min(block, n - b);
        std::memcpy(tmp, x + b, sizeof(float) * len);
        for (int64_t i = 0; i < len; ++i) out[b + i] = std::fmax(tmp[i], zero[0]);
    }
}
"""
lib = load_c("relu_cxx_runtimes", SOURCE, functions=["relu"], flags=["-O3", "-fopenmp"], language="c++")


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.relu(x, out, x.numel())
        return out
