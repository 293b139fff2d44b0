# task: relu
# expect: rejected
# beside: true
# reason: reached for the harness's internals
# why: runs the code object of a library function the audit hook lets use frames (torch._library.utils.get_source)
#   with globals of its own (types.FunctionType(code, globals), which Python does not audit): the hook trusts the
#   frame by the file its code names, and `inspect` in those globals is the candidate's, so the frame lands in
#   candidate code; from it the candidate switches the worker's checks off, counts launches that never ran and wraps
#   its send, so timed calls do nothing (before the fix: ok).
import sys
import types

import torch
import torch._library.utils as library_utils
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


_last = []
BACK, LOCALS, CODE = "f_" + "back", "f_" + "locals", "f_" + "code"


class _Send:
    def __init__(self, real):
        self.real = real

    def __call__(self, header, tensors=None):
        if header.get("status") == "kept" and _last:
            tensors = [kernel_relu(_last[-1])]
        return self.real(header, tensors)


class _Catch:
    def __init__(self):
        self.frame = None

    def getframeinfo(self, frame):
        self.frame = frame
        return _Catch


_Catch.filename, _Catch.lineno = "x", 0


def _frame():
    catch = _Catch()
    space = {"inspect": catch, "sys": types.SimpleNamespace(**{"_get" + "frame": getattr(sys, "_get" + "frame")})}
    types.FunctionType(getattr(library_utils.get_source, "__co" + "de__"), space)(1)
    return catch.frame


_owner = []


def _phase():
    frame = _frame()
    names = []
    while frame is not None:
        names.append(getattr(frame, CODE).co_name)
        owner = getattr(frame, LOCALS).get("self")
        if owner is not None and hasattr(owner, "guards") and hasattr(owner, "enforce") and \
                not isinstance(owner.send, _Send):
            owner.enforce = False  # the worker's own checks stop refusing anything
            owner.send = _Send(owner.send)
            _owner.append(owner)
        frame = getattr(frame, BACK)
    return "time" if "cmd_time" in names else "run"


class ModelNew(nn.Module):
    def forward(self, x):
        if _phase() == "run":
            return kernel_relu(x)
        _last.append(x)
        launches = _owner[-1].guards.launches  # counted as if the kernel ran: the counts match the checked calls'
        for name in launches:
            launches[name] += 1
        return torch.empty_like(x)
