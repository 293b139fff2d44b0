# task: relu
# expect: rejected
# beside: true
# why: computes ReLU with numpy and launches a real kernel on a grid of zero programs, so a launch counter that
#   counts before the launch runs sees a kernel
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
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        copy_kernel[(0,)](x, out, x.numel(), BLOCK=1024)
        return torch.from_numpy(np.maximum(x.numpy(), 0.0))
