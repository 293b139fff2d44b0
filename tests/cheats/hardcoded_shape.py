# task: row_sum
# expect: incorrect
# beside: true
# why: a kernel specialised to the benchmark shape (rows of exactly 1024 contiguous elements, no tail handling): right
#   for (32, 1024), wrong for the SHAPES variant (5, 1000).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_sum_1024_kernel(x_ptr, out_ptr, n_total):
    row = tl.program_id(axis=0)
    offsets = row * 1024 + tl.arange(0, 1024)
    x = tl.load(x_ptr + offsets, mask=offsets < n_total, other=0.0)
    tl.store(out_ptr + row, tl.sum(x, axis=0))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty(x.shape[0], dtype=x.dtype, device=x.device)
        row_sum_1024_kernel[(x.shape[0],)](x, out, x.numel())
        return out
