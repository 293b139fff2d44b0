# task: relu
# expect: rejected
# beside: true
# why: gets frames through an installed package: torch.utils._pytree.tree_map calls sys._getframe (looked up
#   by a built string) on its behalf, so the first non-stdlib frame is torch's; from there it wraps the worker's
#   channel (kept outputs computed on the way out) and bumps the launch counter by hand in timed calls.
import sys
import time
import torch
import torch.nn as nn
import triton
import triton.language as tl
from torch.utils import _pytree


@triton.jit
def relu_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.maximum(tl.load(x_ptr + offsets, mask=mask), 0.0), mask=mask)


def kernel_relu(x):
    x = x.contiguous()
    out = torch.empty_like(x)
    relu_kernel[(triton.cdiv(x.numel(), 262144),)](x, out, x.numel(), BLOCK_SIZE=262144)
    return out


GF, BACK, LOCALS, CODE = "_get" + "frame", "f_" + "back", "f_" + "locals", "f_" + "code"
_last = []
_worker = []
_budget = []


class _Wrapped:
    def __init__(self, real):
        self.real = real

    def __getattr__(self, name):
        return getattr(self.real, name)

    def send(self, header, tensors=None):
        if header.get("status") == "kept" and _last:
            tensors = [kernel_relu(_last[-1])]
        return self.real.send(header, tensors)


def _phase():
    frame = _pytree.tree_map(getattr(sys, GF), [0])[0]
    names = []
    while frame is not None:
        names.append(getattr(frame, CODE).co_name)
        owner = getattr(frame, LOCALS).get("self")
        if owner is not None and hasattr(owner, "ch") and hasattr(owner, "guards"):
            if not isinstance(owner.ch, _Wrapped):
                owner.ch = _Wrapped(owner.ch)
            if not _worker:
                _worker.append(owner)
        frame = getattr(frame, BACK)
    if "cmd_time" in names:
        return "time"
    if "cmd_batch" in names:
        return "batch"
    return "run"


class ModelNew(nn.Module):
    def forward(self, x):
        phase = _phase()
        if phase == "run":
            return kernel_relu(x)
        t0 = time.perf_counter()
        if not _budget:
            torch.relu(x); t1 = time.perf_counter(); torch.relu(x)
            _budget.append((time.perf_counter() - t1) / 6)
            t0 = time.perf_counter()
        _worker[0].guards.launches["triton:relu_kernel"] += 1
        _last[:] = [x]
        out = torch.empty_like(x)
        while time.perf_counter() - t0 < _budget[0]:
            pass
        return out
