# task: relu
# expect: rejected
# beside: true
# why: the Triton kernel never compiles (arange of a non-power-of-two block) and the except clause quietly returns
#   torch.relu(x): correct output, torch's speed, no custom kernel ever ran.
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
        try:
            x = x.contiguous()
            out = torch.empty_like(x)
            n = x.numel()
            relu_kernel[(triton.cdiv(n, 1000),)](x, out, n, BLOCK_SIZE=1000)
            return out
        except Exception:
            return torch.relu(x)
