# task: relu
# expect: runtime_error|crashed
# beside: true
# config: memory_limit_bytes=4294967296
# why: asks for 64 GiB at once and, when that is refused, keeps allocating and touching 1 GiB blocks up to 64 GiB, so
#   overcommit heuristics do not save the machine; the address-space limit (or the OOM killer) must stop it.
import torch
import torch.nn as nn
import triton
import triton.language as tl

_hoard = []


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
        try:
            big = torch.empty(16 * 2**30, dtype=torch.float32)
            big.fill_(1.0)
            _hoard.append(big)
        except RuntimeError:
            pass
        for _ in range(64):
            _hoard.append(torch.ones(2**28, dtype=torch.float32))
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        relu_kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK_SIZE=1024)
        return out
