# task: relu
# expect: rejected
# beside: true
# slow: true
# config: compile_timeout_s=600
# reason: below its dispatcher
# why: a C++ extension built with load_inline whose "kernel" calls ATen's CPU kernel by its direct entry point
#   (at::cpu::clamp_min, below the dispatcher), so no operator reaches the profiler: PyTorch's work invisible to the
#   call's watch. The driver refuses the extension on its undefined symbols before the worker loads it.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <ATen/CPUFunctions.h>

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
    return at::cpu::clamp_min(x, 0);
}
"""

ext = load_inline("relu_cpu_below", [cpp_source], functions=["relu_cpu", "relu_aten"], with_cuda=False,
                  extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.relu_aten(x)
