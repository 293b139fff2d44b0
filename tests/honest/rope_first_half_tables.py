# task: rope
# expect: ok
# max-abs-error: 1e-5
# why: RoPE the way Liger's and unsloth's kernels do it: cos/sin are two equal halves, so the kernel reads only the
#   first half of each table (probes that redraw the tables must keep the halves equal)
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def rope_kernel(x_ptr, cos_ptr, sin_ptr, out_ptr, seq_len, HALF: tl.constexpr):
    row = tl.program_id(0)  # one (batch, head, position) row of head_dim values
    pos = row % seq_len
    i = tl.arange(0, HALF)
    x1 = tl.load(x_ptr + row * 2 * HALF + i)
    x2 = tl.load(x_ptr + row * 2 * HALF + HALF + i)
    c = tl.load(cos_ptr + pos * 2 * HALF + i)
    s = tl.load(sin_ptr + pos * 2 * HALF + i)
    tl.store(out_ptr + row * 2 * HALF + i, x1 * c - x2 * s)
    tl.store(out_ptr + row * 2 * HALF + HALF + i, x2 * c + x1 * s)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x, cos, sin = x.contiguous(), cos.contiguous(), sin.contiguous()
        out = torch.empty_like(x)
        rows = x.numel() // x.shape[-1]
        rope_kernel[(rows,)](x, cos, sin, out, x.shape[-2], HALF=x.shape[-1] // 2)
        return out
