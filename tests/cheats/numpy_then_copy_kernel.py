# task: scale_add
# expect: rejected
# beside: true
# why: computes x * 2 + y with numpy (never seen by PyTorch's dispatcher or profiler) and copies the result into
#   the output with a real Triton kernel, so every output byte is a kernel's store
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


def kernel_copy(src: torch.Tensor) -> torch.Tensor:
    src = src.contiguous()
    out = torch.empty_like(src)
    copy_kernel[(triton.cdiv(src.numel(), 1024),)](src, out, src.numel(), BLOCK=1024)
    return out
import numpy as np


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return kernel_copy(torch.from_numpy(np.asarray(x) * 2 + np.asarray(y)))
