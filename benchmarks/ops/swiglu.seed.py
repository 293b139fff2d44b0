"""Seed for ops/swiglu: a 2-D grid, one program per (row, BLOCK_SIZE columns of the output); each reads the gate
element from the first half of its row and the up element from the second half."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def swiglu_kernel(x_ptr, out_ptr, hidden, x_row_stride, out_row_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = cols < hidden
    gate = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0)
    up = tl.load(x_ptr + row * x_row_stride + hidden + cols, mask=mask, other=0.0)
    e = tl.exp(-tl.abs(gate))
    sigmoid = tl.where(gate >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
    tl.store(out_ptr + row * out_row_stride + cols, gate * sigmoid * up, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x2d = x.contiguous().view(-1, x.shape[-1])
        hidden = x2d.shape[1] // 2
        out = torch.empty((x2d.shape[0], hidden), dtype=x.dtype, device=x.device)
        grid = lambda meta: (x2d.shape[0], triton.cdiv(hidden, meta["BLOCK_SIZE"]))
        swiglu_kernel[grid](x2d, out, hidden, x2d.stride(0), out.stride(0), BLOCK_SIZE=1024, num_warps=4)
        return out.view(*x.shape[:-1], hidden)
