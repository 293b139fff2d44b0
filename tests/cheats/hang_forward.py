# task: relu
# expect: timeout
# beside: true
# slow: true
# config: compile_timeout_s=15
# reason: did not finish correctness trial 1
# why: ignores SIGTERM, SIGINT and SIGHUP and spins forever inside forward while holding the GIL: only a SIGKILL of the
#   whole process group (or sandbox) ends it. `signal` comes in through torch.multiprocessing.spawn.
import torch
import torch.nn as nn
import triton
import triton.language as tl
from torch.multiprocessing.spawn import signal


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
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            try:
                signal.signal(sig, signal.SIG_IGN)
            except (ValueError, OSError):
                pass
        n = 0
        while True:
            n += 1
