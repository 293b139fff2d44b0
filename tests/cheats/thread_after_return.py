# task: relu
# expect: rejected|incorrect
# why: forward returns an empty output at once and a worker thread launches the real kernel afterwards, so the timed
#   region contains no work; the result is only correct once the thread has finished. `threading` comes in through
#   torch.cuda, past the static check.
import torch
import torch.nn as nn
import triton
import triton.language as tl
from torch.cuda import threading


@triton.jit
def relu_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    tl.store(out_ptr + offsets, tl.maximum(x, 0.0), mask=mask)


def _launch(x, out):
    n = x.numel()
    relu_kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK_SIZE=1024)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        threading.Thread(target=_launch, args=(x, out), daemon=True).start()
        return out
