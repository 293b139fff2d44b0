# task: relu
# expect: rejected
# beside: true
# reason: reached for the harness's internals
# why: collections.namedtuple is a frame user the audit hook trusts whoever calls it (it reads its caller's module
#   name); given a `map` of sys.settrace over the candidate's trace function as its field names, it calls sys.settrace
#   from C while iterating them, with its own frame as the nearest one, so the hook lets the candidate's trace
#   function in; that function is handed every frame the harness enters, and from one the candidate switches the
#   worker's checks off, counts launches that never ran and wraps its send, so timed calls do nothing (before the
#   fix: ok).
import collections
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


_last = []
BACK, LOCALS, CODE = "f_" + "back", "f_" + "locals", "f_" + "code"


class _Send:
    def __init__(self, real):
        self.real = real

    def __call__(self, header, tensors=None):
        if header.get("status") == "kept" and _last:
            tensors = [kernel_relu(_last[-1])]
        return self.real(header, tensors)


_phase = ["run"]


def _walk(frame):
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
    _phase[0] = "time" if "cmd_time" in names else "run"


_owner = []
_settrace = getattr(sys, "set" + "trace")


_want = []


def _trace(frame, event, arg):
    if _want:  # the first call the harness makes after forward returned: which phase is this?
        _want.clear()
        _walk(frame)
    return None


def _spy(out):
    _want.append(True)
    if _owner:
        return
    try:
        collections.namedtuple("Fields", map(_settrace, [_trace]))
    except (TypeError, ValueError):
        pass  # settrace returned None, no field name: the trace function is in all the same


class ModelNew(nn.Module):
    def forward(self, x):
        if _phase[0] == "run" or not _owner:
            out = kernel_relu(x)
            _spy(out)
            return out
        _last.append(x)
        launches = _owner[-1].guards.launches  # counted as if the kernel ran: the counts match the checked calls'
        for name in launches:
            launches[name] += 1
        out = torch.empty_like(x)
        _spy(out)
        return out
