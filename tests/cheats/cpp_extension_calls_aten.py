# task: relu
# expect: rejected
# beside: true
# slow: true
# config: compile_timeout_s=600
# why: a C++ extension built with load_inline whose "kernel" is torch::relu, i.e. ATen's own relu reached from C++
#   instead of Python. The evaluator's build stage builds and loads it like an honest extension (the same one as
#   honest/relu_cpp_load_inline.py, which calls its loop); the profiler still sees aten::relu run inside the call.
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
        return ext.relu_aten(x)
