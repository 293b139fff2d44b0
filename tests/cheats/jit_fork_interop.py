# task: scale_add
# expect: rejected
# beside: true
# why: runs x * 2 + y on PyTorch's inter-op thread pool with torch.jit.fork, waits for it, and copies the
#   result out with a real kernel
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


def scale_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x * 2 + y


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return kernel_copy(torch.jit.wait(torch.jit.fork(scale_add, x, y)))
