# task: relu
# expect: rejected
# beside: true
# why: reaches the worker through frames (an exception's traceback, attribute names built at run time so the static
#   check cannot see them) and wraps its channel: timed calls return empty tensors, and when the driver asks for a
#   timed call's outputs the wrapper computes them on the way out, outside every clock.
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
FRAME, BACK, LOCALS, CODE = "tb_" + "frame", "f_" + "back", "f_" + "locals", "f_" + "code"


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
    try:
        raise RuntimeError
    except RuntimeError as error:
        frame = getattr(error.__traceback__, FRAME)
    names = []
    while frame is not None:
        names.append(getattr(frame, CODE).co_name)
        owner = getattr(frame, LOCALS).get("self")
        if owner is not None and hasattr(owner, "ch") and hasattr(owner, "guards") and \
                not isinstance(owner.ch, _Wrapped):
            owner.ch = _Wrapped(owner.ch)
        frame = getattr(frame, BACK)
    return "time" if "cmd_time" in names else "run"


class ModelNew(nn.Module):
    def forward(self, x):
        if _phase() == "run":
            return kernel_relu(x)
        _last.append(x)
        return torch.empty_like(x)
