# task: relu
# expect: rejected|runtime_error|crashed
# beside: true
# canary-process: opforge-cheat-canary-subprocess
# why: the obvious form: subprocess.Popen of a detached 10-minute sleep in a new session, at import; refused by the
#   static check, and in any case it must not survive the evaluation.
import subprocess

import torch
import torch.nn as nn
import triton
import triton.language as tl

_child = subprocess.Popen(["opforge-cheat-canary-subprocess", "600"], executable="/bin/sleep",
                          start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


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
