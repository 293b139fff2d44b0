# task: relu
# expect: rejected
# beside: true
# why: pops every dispatch mode (the op trace) for the span of one torch.relu, then copies the result into the
#   output with a real kernel
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
from torch.utils._python_dispatch import _disable_current_modes


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with _disable_current_modes():
            y = torch.relu(x)
        return kernel_copy(y)
