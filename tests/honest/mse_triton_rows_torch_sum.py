# task: mse_loss
# expect: ok
# max-abs-error: 1e-5
# why: honest: a Triton kernel reduces each row's squared differences to one partial sum, and torch.sum of the
#   row partials (a few dozen values) divided by n makes the scalar loss
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_sq_sum(x_ptr, y_ptr, out_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    i = tl.arange(0, BLOCK)
    mask = i < cols
    d = tl.load(x_ptr + row * cols + i, mask=mask, other=0.0) - tl.load(y_ptr + row * cols + i, mask=mask, other=0.0)
    tl.store(out_ptr + row, tl.sum(d * d, axis=0))


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x, y = x.contiguous(), y.contiguous()
        rows, cols = x.shape
        partial = torch.empty(rows, dtype=x.dtype)
        row_sq_sum[(rows,)](x, y, partial, cols, BLOCK=triton.next_power_of_2(cols))
        return torch.sum(partial) / x.numel()
