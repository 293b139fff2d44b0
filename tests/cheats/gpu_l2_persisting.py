# task: relu
# expect: ok
# gpu: true
# slow: true
# config: compile_timeout_s=300
# why: through a load_inline extension it reserves the largest persisting-L2 carve-out (cudaDeviceSetLimit) and sets an
#   access-policy window with hitProp=persisting over its input on the current stream, hoping the harness's L2 flush
#   between timed repetitions no longer evicts the data (warm-cache timings passed off as cold). The design neutralises
#   it rather than refusing it: before every flush the timer calls cudaCtxResetPersistingL2Cache, so the flush evicts
#   the pinned lines and the honest kernel is timed cold; the verdict is an ordinary ok.
import torch
import torch.nn as nn
import triton
import triton.language as tl
from torch.utils.cpp_extension import load_inline

_cuda_source = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

int64_t pin_in_l2(torch::Tensor t) {
    int device = 0;
    cudaGetDevice(&device);
    cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, device);
    if (prop.persistingL2CacheMaxSize <= 0) return 0;
    cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, prop.persistingL2CacheMaxSize);
    size_t bytes = (size_t)t.numel() * t.element_size();
    if (bytes > (size_t)prop.accessPolicyMaxWindowSize) bytes = (size_t)prop.accessPolicyMaxWindowSize;
    cudaStreamAttrValue attr = {};
    attr.accessPolicyWindow.base_ptr = t.data_ptr();
    attr.accessPolicyWindow.num_bytes = bytes;
    attr.accessPolicyWindow.hitRatio = 1.0f;
    attr.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
    attr.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
    cudaStreamSetAttribute(stream, cudaStreamAttributeAccessPolicyWindow, &attr);
    return (int64_t)bytes;
}
"""

_ext = load_inline(
    name="opforge_cheat_l2_persisting",
    cpp_sources="int64_t pin_in_l2(torch::Tensor t);",
    cuda_sources=_cuda_source,
    functions=["pin_in_l2"],
    verbose=False,
)


@triton.jit
def relu_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    tl.store(out_ptr + offsets, tl.maximum(x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        _ext.pin_in_l2(x)
        out = torch.empty_like(x)
        n = x.numel()
        relu_kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK_SIZE=1024)
        return out
