# task: ordered_weighted_average
# expect: ok
# max-abs-error: 1e-5
# why: honest: torch.sort orders each row (a sort feeding a kernel, a third of the reference's reads), a Triton
#   kernel computes each row's rank-weighted sum
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def weighted_rows(x_ptr, w_ptr, out_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    i = tl.arange(0, BLOCK)
    mask = i < cols
    x = tl.load(x_ptr + row * cols + i, mask=mask, other=0.0)
    w = tl.load(w_ptr + i, mask=mask, other=0.0)
    tl.store(out_ptr + row, tl.sum(x * w, axis=0))


class ModelNew(nn.Module):
    def __init__(self, cols: int):
        super().__init__()
        ranks = torch.arange(cols, dtype=torch.float32)
        self.register_buffer("weights", torch.softmax(-((ranks - cols / 2) ** 2) / cols, dim=0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ordered = torch.sort(x, dim=-1).values.contiguous()
        rows, cols = ordered.shape
        out = torch.empty(rows, dtype=x.dtype)
        weighted_rows[(rows,)](ordered, self.weights, out, cols, BLOCK=triton.next_power_of_2(cols))
        return out
