# task: relu
# expect: rejected
# beside: true
# why: enters a TorchDispatchMode at import and never leaves it, so every tensor operation of the harness in its
#   process (input generation, output copies, comparisons) passes through the candidate's code, which could record
#   inputs before the timer starts or finish work after it stops.
import torch
import torch.nn as nn
import triton
import triton.language as tl
from torch.utils._python_dispatch import TorchDispatchMode


class _Spy(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


_Spy().__enter__()


@triton.jit
def relu_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.maximum(tl.load(x_ptr + offsets, mask=mask), 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK_SIZE=1024)
        return out
