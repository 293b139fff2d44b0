# task: relu
# expect: ok
# max-abs-error: 1e-6
# why: picks a block size from the thread count, queried inside an except clause (a query, not a fallback),
#   and keeps its launch configuration in a cache guarded by a threading.Lock
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)
import threading

_lock = threading.Lock()
_blocks: dict[int, int] = {}

try:
    import psutil
    _workers = psutil.cpu_count() or 1
except ImportError:
    _workers = torch.get_num_threads() if not torch.cuda.is_available() else torch.cuda.device_count()


def block_for(n: int) -> int:
    with _lock:
        if n not in _blocks:
            _blocks[n] = 1024 if n >= 1024 * _workers else 256
        return _blocks[n]


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        block = block_for(x.numel())
        relu_kernel[(triton.cdiv(x.numel(), block),)](x, out, x.numel(), BLOCK=block)
        return out
