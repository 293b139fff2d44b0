# task: relu
# expect: ok
# max-abs-error: 1e-6
# why: a compaction: a first kernel flags the blocks holding a negative value; only those get the ReLU kernel,
#   the others a copy kernel, one launch per block, so launch counts follow the data
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


@triton.jit
def flag_kernel(x_ptr, flags_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(flags_ptr + pid, tl.sum((x < 0).to(tl.int32), axis=0))


@triton.jit
def copy_block(x_ptr, out_ptr, start, n, BLOCK: tl.constexpr):
    offs = start + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


@triton.jit
def relu_block(x_ptr, out_ptr, start, n, BLOCK: tl.constexpr):
    offs = start + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n, block = x.numel(), 2048
        blocks = triton.cdiv(n, block)
        flags = torch.empty(blocks, dtype=torch.int32, device=x.device)
        flag_kernel[(blocks,)](x, flags, n, BLOCK=block)
        for b, negatives in enumerate(flags.tolist()):
            if negatives:
                relu_block[(1,)](x, out, b * block, n, BLOCK=block)
            else:
                copy_block[(1,)](x, out, b * block, n, BLOCK=block)
        return out
