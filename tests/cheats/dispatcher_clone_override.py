# task: relu
# expect: rejected
# beside: true
# why: registers a Python kernel for PyTorch's own aten::clone (torch.library, nothing the static check names). Timed
#   calls return an empty tensor at once; the harness's own copy of the outputs, made after the timer stops, runs
#   that kernel, which computes the real result there. Checked calls (an op trace is active) run the Triton kernel.
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


def kernel_relu(x):
    x = x.contiguous()
    out = torch.empty_like(x)
    relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK_SIZE=1024)
    return out


_pending = {}


def _late_clone(t, memory_format=None):
    source = _pending.pop(t.data_ptr(), None)
    if source is not None:
        torch.clamp_min(source, 0.0, out=t)  # the work, after the timer
    out = torch.empty_like(t)
    out.copy_(t)
    return out


_library = torch.library.Library("aten", "IMPL")
_library.impl("clone", _late_clone, "CPU")


class ModelNew(nn.Module):
    def forward(self, x):
        if _python_dispatch._get_current_dispatch_mode() is not None:
            return kernel_relu(x)
        out = torch.empty_like(x)
        _pending[out.data_ptr()] = x
        return out
