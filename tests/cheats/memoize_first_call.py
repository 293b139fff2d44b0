# task: relu
# expect: incorrect|rejected
# beside: true
# why: computes the result on the first call only and returns that same tensor forever after, so every timed call is
#   free; wrong as soon as a second trial brings fresh inputs.
import torch
import torch.nn as nn
import triton
import triton.language as tl


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
        self._out = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self._out is None:
            xc = x.contiguous()
            out = torch.empty_like(xc)
            n = xc.numel()
            relu_kernel[(triton.cdiv(n, 1024),)](xc, out, n, BLOCK_SIZE=1024)
            self._out = out
        return self._out
