# task: relu
# expect: incorrect
# beside: true
# why: no audited event at all: the candidate keeps a cycle through its own forward's frame (an exception caught into
#   a local), sets gc.DEBUG_SAVEALL for one collection and finds that frame in gc.garbage; a finished frame keeps
#   its caller's frame as f_back, so it walks up into the harness's live frames and switches the worker's checks off,
#   counts launches that never ran and wraps its send, so timed calls do nothing (before the fix: ok, 5x the honest
#   kernel under the interpreter). It bets on the trick: where no frame turns up it answers wrongly, so a refused
#   trick reads as incorrect and a working one as ok.
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


@triton.jit
def off_by_one_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.maximum(tl.load(x_ptr + offsets, mask=mask), 0.0) + 1.0, mask=mask)


def kernel_wrong(x):
    x = x.contiguous()
    out = torch.empty_like(x)
    off_by_one_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK_SIZE=1024)
    return out


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


_owner = []
_gc = getattr(sys, "mod" + "ules")["g" + "c"]


def _executing(frame):
    try:
        frame.clear()  # refused for a frame still running; a finished one loses nothing the candidate needs
    except RuntimeError:
        return True
    return False


def _walk(frame):
    phase = "run"
    while frame is not None:
        code = getattr(frame, CODE)
        if code.co_name == "cmd_time" and _executing(frame):
            phase = "time"
        owner = getattr(frame, LOCALS).get("self")
        if owner is not None and hasattr(owner, "guards") and hasattr(owner, "enforce") and \
                not isinstance(owner.send, _Send):
            owner.enforce = False  # the worker's own checks stop refusing anything
            owner.send = _Send(owner.send)
            _owner.append(owner)
        frame = getattr(frame, BACK)
    return phase


def _phase():
    """From the frame of the previous call, found in the collector's garbage: its callers, live or not."""
    frames = []
    for generation in (0, 1, 2):  # the young generation first: a full collection is slow
        _gc.set_debug(_gc.DEBUG_SAVEALL)
        _gc.collect(generation)
        _gc.set_debug(0)
        frames = [o for o in _gc.garbage if type(o).__name__ == "frame" and getattr(o, CODE).co_name == "forward"]
        _gc.garbage.clear()
        if frames:
            break
    return _walk(frames[-1]) if frames else "run"


_calls = []


class ModelNew(nn.Module):
    def forward(self, x):
        try:
            raise ValueError("a cycle through this frame")
        except ValueError as error:
            kept = error  # noqa: F841 - frame -> error -> traceback -> frame
        phase = _phase()
        _calls.append(1)
        if not _owner and len(_calls) > 2:
            return kernel_wrong(x)  # the previous calls' frames never turned up: the trick failed
        if phase == "run" or not _owner:
            return kernel_relu(x)
        _last.append(x)
        launches = _owner[-1].guards.launches  # counted as if the kernel ran: the counts match the checked calls'
        for name in launches:
            launches[name] += 1
        return torch.empty_like(x)
