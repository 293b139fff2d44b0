# task: relu
# expect: ok
# max-abs-error: 1e-6
# why: @triton.autotune over two block sizes (as in FlagGems and attorch); under the CPU interpreter one config
#   runs
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


@triton.autotune(configs=[triton.Config({"BLOCK": 512}), triton.Config({"BLOCK": 1024})], key=["n"])
@triton.jit
def relu_tuned(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        relu_tuned[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, out, n)
        return out
