# task: scale_add_loose
# expect: incorrect
# beside: true
# why: computes x * 2 + y in fp16 inside a fp32 task whose tolerance is 1e-2: fine for N(0, 1) * 4, but fp16
#   overflows above 65504
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


@triton.jit
def scale_add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float16)
    y = tl.load(y_ptr + offs, mask=mask).to(tl.float16)
    tl.store(out_ptr + offs, (x * 2 + y).to(tl.float32), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x, y = x.contiguous(), y.contiguous()
        out = torch.empty_like(x)
        scale_add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
        return out
