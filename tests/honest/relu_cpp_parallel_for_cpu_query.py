# task: relu
# expect: ok
# slow: true
# config: compile_timeout_s=600
# why: honest C++ CPU extension in the style of PyTorch's own CPU kernels and of many projects' extensions
#   (load_inline, cpp_sources only): at::parallel_for over the elements, at::vec::Vectorized<float> for the body,
#   and a CPU feature query (at::cpu::is_avx512_vnni_supported, from ATen/cpu/Utils.h) before the loop. The query
#   is a symbol of at::cpu, the namespace of ATen's CPU kernels, and was refused as "PyTorch below its dispatcher"
#   until 2026-11-29; it computes nothing. Its output comes from at::empty_like, through the dispatcher.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <ATen/cpu/Utils.h>
#include <ATen/cpu/vec/vec.h>

torch::Tensor relu_par(torch::Tensor x) {
    TORCH_CHECK(x.scalar_type() == at::kFloat, "float32 only");
    auto xc = x.contiguous();
    auto out = at::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    using Vec = at::vec::Vectorized<float>;
    // A kernel with an int8 path would take it here; this one only notes which it would have been.
    const bool vnni = at::cpu::is_avx512_vnni_supported();
    const int64_t grain = vnni ? (1 << 15) : (1 << 14);
    at::parallel_for(0, xc.numel(), grain, [&](int64_t begin, int64_t end) {
        int64_t i = begin;
        for (; i + Vec::size() <= end; i += Vec::size()) {
            at::vec::clamp_min(Vec::loadu(in + i), Vec(0.0f)).store(o + i);
        }
        for (; i < end; ++i) o[i] = in[i] > 0.0f ? in[i] : 0.0f;
    });
    return out;
}
"""

ext = load_inline("relu_par_cpu_query", [cpp_source], functions=["relu_par"], with_cuda=False,
                  extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.relu_par(x)
