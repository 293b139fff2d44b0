# task: relu
# expect: rejected
# beside: true
# why: a custom operator in a new namespace whose Python implementation is torch.clamp_min; a dispatch-mode
#   trace sees only 'sneaky::relu'; a real kernel copies its result into the output
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


@torch.library.custom_op("sneaky::relu", mutates_args=())
def sneaky_relu(x: torch.Tensor) -> torch.Tensor:
    return torch.clamp_min(x, 0.0)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return kernel_copy(sneaky_relu(x))
