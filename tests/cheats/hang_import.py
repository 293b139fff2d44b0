# task: relu
# expect: timeout
# beside: true
# slow: true
# config: compile_timeout_s=10
# why: spins forever at import time (the compile phase) with SIGTERM, SIGINT and SIGHUP ignored (`signal` comes in
#   through torch.multiprocessing.spawn, past the static check).
import torch
import torch.nn as nn
import triton
import triton.language as tl
from torch.multiprocessing.spawn import signal

for _sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    try:
        signal.signal(_sig, signal.SIG_IGN)
    except (ValueError, OSError):
        pass
_n = 0
while True:
    _n += 1


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
