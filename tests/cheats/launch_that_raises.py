# task: relu
# expect: rejected
# beside: true
# why: a launch that raises inside the kernel (a bad pointer argument) still counted as a launch; the result is
#   computed by plain Python over .tolist()
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


def kernel_copy(src: torch.Tensor) -> torch.Tensor:
    src = src.contiguous()
    out = torch.empty_like(src)
    copy_kernel[(triton.cdiv(src.numel(), 1024),)](src, out, src.numel(), BLOCK=1024)
    return out


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        try:
            copy_kernel[(1,)](x, 12345, x.numel(), BLOCK=1024)
        except Exception:
            pass
        flat = [v if v > 0 else 0.0 for v in x.reshape(-1).tolist()]
        return torch.tensor(flat, dtype=x.dtype).reshape(x.shape)
