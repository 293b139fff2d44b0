# task: relu
# expect: rejected
# gpu: true
# why: launches the (honest) kernel on a private side stream that the default stream never waits for, after a long
#   dummy spin, so CUDA events recorded on the current stream around forward measure nothing, and a result read without
#   a device-wide synchronisation is incomplete. The timer synchronises the whole device after each call's end mark
#   and reports how long the device stayed busy; the driver refuses calls that return before their work is done.
import torch
import torch.nn as nn
import triton
import triton.language as tl

_side_stream = None


@triton.jit
def relu_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    tl.store(out_ptr + offsets, tl.maximum(x, 0.0), mask=mask)


@triton.jit
def spin_kernel(ptr, iters):
    acc = tl.load(ptr)
    for _ in range(iters):
        acc = acc * 1.0000001 + 1e-7
    tl.store(ptr, acc)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._scratch = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        global _side_stream
        if _side_stream is None:
            _side_stream = torch.cuda.Stream(device=x.device)
        if self._scratch is None:
            self._scratch = torch.zeros(1, device=x.device)
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        with torch.cuda.stream(_side_stream):
            spin_kernel[(1,)](self._scratch, 20000)
            relu_kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK_SIZE=1024)
        return out
