# task: relu
# expect: ok
# max-abs-error: 1e-6
# why: uses torch.func.vmap to build a per-row view of the input before the kernel (functorch registers its own
#   kernels on first use; the candidate registered none)
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


def row_view(r: torch.Tensor) -> torch.Tensor:
    return r.reshape(-1)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = torch.func.vmap(row_view)(x).contiguous()
        out = torch.empty_like(rows)
        relu_kernel[(triton.cdiv(rows.numel(), 1024),)](rows, out, rows.numel(), BLOCK=1024)
        return out.view(x.shape)
