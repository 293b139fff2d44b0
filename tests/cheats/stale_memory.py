# task: relu
# expect: incorrect|rejected
# beside: true
# why: computes honestly on the first call only; afterwards it allocates an uninitialised output of the same size
#   (which the allocator usually serves from the block of the previous, freed output) and launches a kernel that stores
#   nothing. A timing loop that repeats its inputs and drops the outputs reads the previous correct result.
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
        self._warm = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        # After the first call every lane is masked off: the launch is counted, nothing is written.
        n = x.numel() if not self._warm else 0
        relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, n, BLOCK_SIZE=1024)
        self._warm = True
        return out
