# task: relu
# expect: rejected|incorrect
# beside: true
# why: caches the output keyed by (id(x), x.data_ptr(), shape) and returns it on a repeat, so a timing loop that reuses
#   (or refills in place) the same input tensor times a dictionary lookup and gets a stale result for new data.
import torch
import torch.nn as nn
import triton
import triton.language as tl

_cache = {}


@triton.jit
def relu_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    tl.store(out_ptr + offsets, tl.maximum(x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        key = (id(x), x.data_ptr(), tuple(x.shape))
        hit = _cache.get(key)
        if hit is not None:
            return hit
        xc = x.contiguous()
        out = torch.empty_like(xc)
        n = xc.numel()
        relu_kernel[(triton.cdiv(n, 1024),)](xc, out, n, BLOCK_SIZE=1024)
        _cache[key] = out
        return out
