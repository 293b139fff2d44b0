# task: relu
# expect: ok
# max-abs-error: 1e-6
# why: honest Triton kernel beside a TorchScript helper: TorchScript reads its caller's frame to resolve names, a use
#   of frames by an installed package that the evaluator's audit hook must leave alone.
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
def flat(x: torch.Tensor) -> torch.Tensor:
    return x.contiguous().view(-1)


class ModelNew(nn.Module):
    def forward(self, x):
        source = flat(x)
        out = torch.empty_like(source)
        relu_kernel[(triton.cdiv(source.numel(), 1024),)](source, out, source.numel(), BLOCK_SIZE=1024)
        return out.view(x.shape)
