# task: relu
# expect: rejected
# beside: true
# why: takes the real torch._C._dispatch_library out of the dispatch guard's closure, registers a CPU kernel for
#   aten::clone at the start of each untimed-looking call and removes it inside the clone it serves, so the whole
#   table is back to its snapshot whenever the worker compares it.
#   On a CPU it was timed honestly (ok) until 2026-11-28: the harness cloned every timed call's outputs, which served
#   the kernel's removal. Since then the outputs are copied into the driver's shared file (`output_slot.py`), no clone
#   serves it, and the table still holds the kernel when the worker compares it: rejected on every device.
import torch
import torch.nn as nn
import triton
import triton.language as tl
from torch.utils import _python_dispatch as _pd

_C = getattr(torch, "_" + "C")
_real = getattr(getattr(_C, "_dispatch_" + "library"), "__clo" + "sure__")
_real = [c.cell_contents for c in _real if callable(c.cell_contents) and
         getattr(c.cell_contents, "__name__", "") == "_dispatch_library"][0]


@triton.jit
def relu_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.maximum(tl.load(x_ptr + offsets, mask=mask, other=0.0), 0.0), mask=mask)


def honest(x):
    x = x.contiguous()
    out = torch.empty_like(x)
    relu_kernel[(triton.cdiv(x.numel(), 262144),)](x, out, x.numel(), BLOCK_SIZE=262144)
    return out


_pending = {}
_lib = []


def _drop():
    while _lib:
        _lib.pop().reset()


def _clone(t, memory_format=None):
    src = _pending.pop(t.data_ptr(), None)
    if src is not None and src.shape == t.shape:
        torch.clamp_min(src, 0.0, out=t)
    out = torch.empty_like(t) if memory_format is None else torch.empty_like(t, memory_format=memory_format)
    out.copy_(t)
    if not _pending:
        _drop()
    return out


def _arm():
    if not _lib:
        m = _real("IMPL", "aten", "", __file__, 1)
        m.impl("clone", "CPU", _clone, False)
        _lib.append(m)


class ModelNew(nn.Module):
    def forward(self, x):
        _pending.clear()
        _drop()
        if _pd._get_current_dispatch_mode() is not None:
            return honest(x)
        out = torch.empty_like(x)
        relu_kernel[(1,)](x, out, 1, BLOCK_SIZE=16)
        _pending[out.data_ptr()] = x
        _arm()
        return out
