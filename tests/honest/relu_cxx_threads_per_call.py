# task: relu
# expect: ok
# why: honest C++ kernel that splits each call over std::thread workers it starts and joins inside the call (no pool,
#   no OpenMP), built with the flags its project would use (-pthread, -Wall): the threads end before the call
#   returns, so the driver's thread count after each call finds none left, and -pthread was refused by load_c's
#   flag list until 2026-11-29.
import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

extern "C" void relu(const float* x, float* out, int64_t n) {
    const unsigned workers = std::max(1u, std::min(2u, std::thread::hardware_concurrency()));
    const int64_t chunk = (n + workers - 1) / workers;
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < workers; ++t) {
        threads.emplace_back([=] {
            const int64_t begin = t * chunk, end = std::min<int64_t>(n, begin + chunk);
            for (int64_t i = begin; i < end; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
        });
    }
    for (auto& thread : threads) thread.join();
}
"""
lib = load_c("relu_cxx_threads", SOURCE, functions=["relu"], language="c++",
             flags=["-O3", "-march=native", "-std=c++17", "-pthread", "-Wall"])


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.relu(x, out, x.numel())
        return out
