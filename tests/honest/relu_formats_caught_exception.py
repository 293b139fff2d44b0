# task: relu
# expect: ok
# max-abs-error: 1e-6
# why: honest Triton kernel that raises, catches and formats an exception (traceback.format_exception): traceback's
#   own walk over the frames stays inside traceback and must be allowed.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.maximum(tl.load(x_ptr + offsets, mask=mask, other=0.0), 0.0), mask=mask)


def launch(x):
    x = x.contiguous()
    out = torch.empty_like(x)
    relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK_SIZE=1024)
    return out
import traceback


class ShapeError(ValueError):
    pass


def check(x):
    if x.numel() > 0:
        raise ShapeError("fine")


class ModelNew(nn.Module):
    def forward(self, x):
        try:
            check(x)
        except ShapeError as e:
            msg = str(e)
            tb = e.__traceback__
            summary = traceback.format_exception(type(e), e, tb)
        try:
            next(iter([]))
        except StopIteration:
            pass
        def gen():
            yield 1
        list(gen())
        return launch(x)
