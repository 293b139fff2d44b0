# task: relu
# expect: rejected
# beside: true
# why: returns a tuple subclass whose __iter__ finishes the work when the harness unpacks the result (after
#   the timer stopped): the timed call itself only launches a kernel on a tiny slice
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
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


class Later(tuple):
    def __iter__(self):
        x, out = tuple.__getitem__(self, 0), tuple.__getitem__(self, 1)
        relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
        return iter((out,))

    def __len__(self):
        return 1


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor):
        x = x.contiguous()
        out = torch.empty_like(x)
        relu_kernel[(1,)](x, out, 4, BLOCK=4)
        return Later((x, out))
