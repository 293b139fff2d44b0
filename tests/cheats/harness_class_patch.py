# task: relu
# expect: rejected
# beside: true
# why: patches the harness's own class, reached through sys.modules by a name built at run time (the static check
#   refuses importing the harness): Channel.send is replaced so that a timed call's kept outputs are computed on the
#   way out while the timed calls themselves return empty tensors.
import sys

import torch
import torch.nn as nn
import triton
import triton.language as tl


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


_modules = getattr(sys, "mod" + "ules")
Channel = _modules["evaluator." + "wire.frames"].Channel
_real_send = Channel.send
_last = []


def _send(self, header, tensors=None):
    if header.get("status") == "kept" and _last:
        tensors = [kernel_relu(_last[-1])]
    return _real_send(self, header, tensors)


Channel.send = _send


class ModelNew(nn.Module):
    def forward(self, x):
        _last.append(x)
        return torch.empty_like(x)
