# task: relu
# expect: ok
# slow: true
# config: compile_timeout_s=600
# why: honest C++ CPU kernel through torch.utils.cpp_extension.load_inline with cpp_sources only (no CUDA): a loop
#   over data_ptr<float>() behind a pybind11 function, built once by the evaluator's sandboxed build stage and then
#   loaded from its cache. The extension (name, sources, functions, flags) is the same text as in
#   cheats/cpp_extension_calls_aten.py, which calls its other function: one build serves both.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>

torch::Tensor relu_cpu(torch::Tensor x) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t n = xc.numel();
    for (int64_t i = 0; i < n; ++i) o[i] = in[i] > 0.0f ? in[i] : 0.0f;
    return out;
}

torch::Tensor relu_aten(torch::Tensor x) {
    return torch::relu(x);
}
"""

ext = load_inline("relu_cpu_ext", [cpp_source], functions=["relu_cpu", "relu_aten"], with_cuda=False,
                  extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.relu_cpu(x)
