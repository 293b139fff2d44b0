# task: relu
# expect: incorrect
# beside: true
# why: writes NaN everywhere (a store-only kernel, the fastest possible): a checker written as
#   `if (out - ref).abs().max() > tol: fail` passes it, because every comparison with NaN is false.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def nan_kernel(out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    nan = tl.full((BLOCK_SIZE,), float("nan"), dtype=tl.float32)
    tl.store(out_ptr + offsets, nan, mask=offsets < n_elements)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        n = out.numel()
        nan_kernel[(triton.cdiv(n, 1024),)](out, n, BLOCK_SIZE=1024)
        return out
