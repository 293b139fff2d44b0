# task: relu
# expect: rejected|incorrect
# beside: true
# why: returns a torch.Tensor subclass whose __torch_function__ launches the kernel only when the output is first used
#   (by the comparison), so forward itself costs one allocation.
import torch
import torch.nn as nn
import triton
import triton.language as tl

_DisableTorchFunctionSubclass = getattr(getattr(torch, "_" + "C"), "DisableTorchFunctionSubclass")


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
        t = torch.Tensor._make_subclass(cls, torch.empty_like(src))
        t._lazy_src = src
        t._lazy_done = False
        return t

    def _materialize(self):
        if self.__dict__.get("_lazy_done", True):
            return
        self._lazy_done = True
        with _DisableTorchFunctionSubclass():
            plain = self.as_subclass(torch.Tensor)
            src = self._lazy_src
            n = src.numel()
            relu_kernel[(triton.cdiv(n, 1024),)](src, plain, n, BLOCK_SIZE=1024)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        for a in list(args) + list(kwargs.values()):
            if isinstance(a, (list, tuple)):
                for b in a:
                    if isinstance(b, LazyReLU):
                        b._materialize()
            elif isinstance(a, LazyReLU):
                a._materialize()
        with _DisableTorchFunctionSubclass():
            return func(*args, **kwargs)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return LazyReLU(x.contiguous())
