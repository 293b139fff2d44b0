# task: relu
# expect: rejected|incorrect
# beside: true
# why: returns a view of the input after an in-place kernel; on the task's non-negative inputs the kernel writes back the
#   same values, so the input looks unchanged and only an aliasing check (or the negative second distribution) catches it.
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

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.numel()
        relu_kernel[(triton.cdiv(n, 1024),)](x, x, n, BLOCK_SIZE=1024)
        return x.view(x.shape)
