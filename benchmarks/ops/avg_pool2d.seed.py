"""Seed for ops/avg_pool2d: one program per BLOCK_SIZE outputs of the flattened (N, C, OH, OW) result; each output
sums the in-bounds pixels of its window and divides by how many there were (count_include_pad=False)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def avg_pool2d_kernel(x_ptr, out_ptr, n_outputs, height, width, out_h, out_w, kernel_size, stride, padding,
                      BLOCK_SIZE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_outputs
    plane_index = offs // (out_h * out_w)  # which (n, c) plane
    oh = (offs // out_w) % out_h
    ow = offs % out_w
    first_ih = oh * stride - padding
    first_iw = ow * stride - padding
    x_window = x_ptr + plane_index * (height * width) + first_ih * width + first_iw
    total = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    count = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    row_ptrs = x_window
    for kh in range(0, kernel_size):
        ih = first_ih + kh
        row_ok = mask & (ih >= 0) & (ih < height)
        for kw in range(0, kernel_size):
            iw = first_iw + kw
            ok = row_ok & (iw >= 0) & (iw < width)
            total += tl.load(row_ptrs + kw, mask=ok, other=0.0)
            count += tl.where(ok, 1.0, 0.0)
        row_ptrs += width
    tl.store(out_ptr + offs, total / tl.maximum(count, 1.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, kernel_size: int = 3, stride: int = 2, padding: int = 1):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride
        self.padding = padding

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        batch, channels, height, width = x.shape
        out_h = (height + 2 * self.padding - self.kernel_size) // self.stride + 1
        out_w = (width + 2 * self.padding - self.kernel_size) // self.stride + 1
        out = torch.empty((batch, channels, out_h, out_w), dtype=x.dtype, device=x.device)
        n_outputs = out.numel()
        grid = lambda meta: (triton.cdiv(n_outputs, meta["BLOCK_SIZE"]),)
        avg_pool2d_kernel[grid](
            x, out, n_outputs, height, width, out_h, out_w, self.kernel_size, self.stride, self.padding,
            BLOCK_SIZE=1024, num_warps=4,
        )
        return out
