# task: relu
# expect: rejected|incorrect
# beside: true
# why: returns a storage-less wrapper subclass whose __torch_dispatch__ runs the kernel the first time any aten op touches
#   it, so forward does no work at all and the comparison silently triggers the computation.
import torch
import torch.nn as nn
import triton
import triton.language as tl
from torch.utils._pytree import tree_map


@triton.jit
def relu_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    tl.store(out_ptr + offsets, tl.maximum(x, 0.0), mask=mask)


class LazyReLU(torch.Tensor):
    @staticmethod
    def __new__(cls, src):
        r = torch.Tensor._make_wrapper_subclass(
            cls, src.shape, strides=src.stride(), dtype=src.dtype, device=src.device, requires_grad=False
        )
        r._src = src
        r._real = None
        return r

    def _force(self):
        if self._real is None:
            out = torch.empty_like(self._src)
            n = out.numel()
            relu_kernel[(triton.cdiv(n, 1024),)](self._src, out, n, BLOCK_SIZE=1024)
            self._real = out
        return self._real

    def __repr__(self):
        return repr(self._force())

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        def unwrap(a):
            return a._force() if isinstance(a, LazyReLU) else a

        return func(*tree_map(unwrap, args), **tree_map(unwrap, kwargs or {}))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return LazyReLU(x.contiguous())
