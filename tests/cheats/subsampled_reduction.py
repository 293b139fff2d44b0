# task: row_sum
# expect: incorrect
# beside: true
# why: reads only every other element of each row and doubles the sum: half the memory traffic, an estimate instead of
#   the sum.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_half_sum_kernel(x_ptr, out_ptr, n_cols, stride_row, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(axis=0)
    cols = 2 * tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + row * stride_row + cols, mask=cols < n_cols, other=0.0)
    tl.store(out_ptr + row, 2.0 * tl.sum(x, axis=0))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        out = torch.empty(rows, dtype=x.dtype, device=x.device)
        block = triton.next_power_of_2((cols + 1) // 2)
        row_half_sum_kernel[(rows,)](x, out, cols, x.stride(0), BLOCK_SIZE=block)
        return out
