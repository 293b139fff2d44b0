# task: relu
# expect: rejected
# expect-without-gpu: ok
# why: tells checked calls from timed ones by the op trace that is active only while results are checked (a torch
#   private API, no frames): checked calls run its Triton kernel, timed calls plain PyTorch, so the time reported is
#   PyTorch's and the kernel's own is never measured.
#   Under the CPU interpreter a dispatch mode is active in every call (the copy grants of the store ledger),
#   timed ones too: it can never tell, runs its kernel on every call, and is timed honestly (ok).
import torch
import torch.nn as nn
import triton
import triton.language as tl
from torch.utils import _python_dispatch


@triton.jit
def relu_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.maximum(tl.load(x_ptr + offsets, mask=mask), 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        if _python_dispatch._get_current_dispatch_mode() is None:
            return torch.relu(x)  # timed: PyTorch
        x = x.contiguous()
        out = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK_SIZE=1024)
        return out
