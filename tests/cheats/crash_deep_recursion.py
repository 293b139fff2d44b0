# task: relu
# expect: crashed|runtime_error
# beside: true
# why: lifts the recursion limit and recurses through a C builtin (map) so each level burns C stack: a segfault by stack
#   overflow on Python 3.11 (a RecursionError on Python 3.12+, which has a separate C recursion limit).
import sys

import torch
import torch.nn as nn
import triton
import triton.language as tl


def _dive(n):
    return list(map(_dive, [n + 1]))


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
        sys.setrecursionlimit(10**8)
        _dive(0)
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        relu_kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK_SIZE=1024)
        return out
