# task: relu
# expect: rejected
# why: starts a callback on PyTorch's inter-op thread pool (torch.jit.fork, then .then()) that keeps the CPU busy
#   forever; the pool's threads are not Python threads, so the thread count does not see it. Work that runs while
#   the worker is idle can slow the reference down (the two workers share the machine) or finish results late.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.maximum(tl.load(x_ptr + offsets, mask=mask), 0.0), mask=mask)


@torch.jit.script
def _nothing(x: torch.Tensor) -> torch.Tensor:
    return x + 1


@torch.jit.script
def _start(x: torch.Tensor) -> torch.jit.Future[torch.Tensor]:
    return torch.jit.fork(_nothing, x)


def _burn(_future):
    a = torch.rand(1 << 16)
    while True:
        a.mul_(1.0001).add_(0.5).clamp_(-1.0, 1.0)


_started = []


class ModelNew(nn.Module):
    def forward(self, x):
        if not _started:
            _started.append(_start(torch.zeros(4)).then(_burn))
        x = x.contiguous()
        out = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK_SIZE=1024)
        return out
