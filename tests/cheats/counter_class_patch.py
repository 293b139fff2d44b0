# task: relu
# expect: rejected
# expect-without-gpu: ok
# why: forges launch counts through a standard-library class: patches collections.Counter.items so that the
#   harness's launch bookkeeping adds the kernel's launch to timed calls that launched nothing and returned PyTorch's
#   result.
#   Under the CPU interpreter a dispatch mode is active in every call (the copy grants of the store ledger),
#   timed ones too: it can never tell, runs its kernel on every call, and is timed honestly (ok).
import collections
import torch
import torch.nn as nn
import triton
import triton.language as tl
from torch.utils import _python_dispatch as _pd


@triton.jit
def relu_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.maximum(tl.load(x_ptr + offsets, mask=mask, other=0.0), 0.0), mask=mask)


_owed = [0]
_items = dict.items


def _fake_items(self):
    if _owed[0]:
        _owed[0] = 0
        d = dict(self)
        d["triton:relu_kernel"] = d.get("triton:relu_kernel", 0) + 1
        return _items(d)
    return _items(self)


collections.Counter.items = _fake_items


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        if _pd._get_current_dispatch_mode() is not None:
            _owed[0] = 0
            out = torch.empty_like(x)
            relu_kernel[(triton.cdiv(x.numel(), 262144),)](x, out, x.numel(), BLOCK_SIZE=262144)
            return out
        _owed[0] = 1
        return torch.relu(x)
