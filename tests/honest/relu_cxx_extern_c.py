# task: relu
# expect: ok
# why: honest native C++17 kernel (language="c++"): a template and std::max behind an extern "C" entry point that
#   returns how many elements it wrote (a scalar return value).
import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <algorithm>
#include <cstdint>

template <typename T>
static void relu_impl(const T* x, T* out, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) out[i] = std::max(x[i], T(0));
}

extern "C" std::int64_t relu_f32(const float* x, float* out, std::int64_t n) {
    relu_impl(x, out, n);
    return n;
}
"""
lib = load_c("relu_cxx", [SOURCE], functions=["relu_f32"], flags=["-O3", "-std=c++17"], language="c++")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        written = lib.relu_f32(x, out, x.numel())
        if written != x.numel():
            raise RuntimeError(f"relu_f32 wrote {written} of {x.numel()} elements")
        return out
