# task: relu
# expect: rejected
# why: starts a daemon thread at import that keeps spinning for the rest of the process's life (stealing CPU from anything
#   measured alongside it, e.g. a reference timed on the same cores, and able to touch outputs after they are returned);
#   forward itself is honest. `threading` comes in through torch.cuda, past the static check.
import torch
import torch.nn as nn
import triton
import triton.language as tl
from torch.cuda import threading


def _spin():
    n = 0
    while True:
        n += 1


threading.Thread(target=_spin, name="opforge-cheat-spinner", daemon=True).start()


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
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        relu_kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK_SIZE=1024)
        return out
