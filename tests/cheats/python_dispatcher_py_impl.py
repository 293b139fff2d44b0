# task: relu
# expect: rejected
# beside: true
# why: overrides aten::clone without a dispatcher library: OpOverload.py_impl(CPU) plus PyTorch's Python
#   dispatcher enabled at import (a thread-local flag, no mode on a stack, the dispatch dump unchanged). Timed calls
#   return an empty tensor after a 1-element launch; the harness's clone of the outputs computes the result.
import torch
import torch.nn as nn
import triton
import triton.language as tl
from torch._C import DispatchKey
from torch._dispatch.python import enable_python_dispatcher
from torch.utils import _python_dispatch as _pd


@triton.jit
def relu_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    tl.store(out_ptr + offsets, tl.maximum(x, 0.0), mask=mask)


def honest(x):
    x = x.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    relu_kernel[(triton.cdiv(n, 262144),)](x, out, n, BLOCK_SIZE=262144)
    return out


_pending = {}


def _clone(t, memory_format=None):
    src = _pending.pop(t.data_ptr(), None)
    if src is not None and src.shape == t.shape:
        torch.clamp_min(src, 0.0, out=t)   # the real work, after the timer
    out = torch.empty_like(t) if memory_format is None else torch.empty_like(t, memory_format=memory_format)
    out.copy_(t)
    return out


torch.ops.aten.clone.default.py_impl(DispatchKey.CPU)(_clone)
_ctx = enable_python_dispatcher()
_ctx.__enter__()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        _pending.clear()
        if _pd._get_current_dispatch_mode() is not None:
            return honest(x)
        out = torch.empty_like(x)
        relu_kernel[(1,)](x, out, 1, BLOCK_SIZE=16)
        _pending[out.data_ptr()] = x
        return out
