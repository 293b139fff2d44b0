# task: relu
# expect: rejected
# beside: true
# why: the try/except fallback with the torch call moved into a helper, so the except clause itself contains no torch
#   call for the static check to see: the kernel never compiles (arange of a non-power-of-two block) and the helper
#   returns torch.relu(x). Must be caught at run time (no kernel launch completed; the op trace shows the reference op).
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


def _portable_path(x):
    return torch.relu(x)


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
            return _portable_path(x)
