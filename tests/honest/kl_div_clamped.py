# task: kl_div
# expect: ok
# max-abs-error: 1e-5
# why: KL divergence with the log's argument clamped away from zero (as most kernels do): where a probe made a
#   probability negative, the reference gives NaN and this kernel a number; such probes are out of the task's domain
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def kl_rows(p_ptr, t_ptr, partial_ptr, dim, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    i = tl.arange(0, BLOCK)
    mask = i < dim
    p = tl.load(p_ptr + row * dim + i, mask=mask, other=1.0)
    t = tl.load(t_ptr + row * dim + i, mask=mask, other=0.0)
    logp = tl.log(tl.maximum(p, 1e-12))
    logt = tl.log(tl.maximum(t, 1e-12))
    term = tl.where(t > 0, t * (logt - logp), 0.0)
    tl.store(partial_ptr + row, tl.sum(term, axis=0))


@triton.jit
def mean_rows(partial_ptr, out_ptr, rows, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    v = tl.load(partial_ptr + i, mask=i < rows, other=0.0)
    tl.store(out_ptr, tl.sum(v, axis=0) / rows)


class ModelNew(nn.Module):
    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        p, t = predictions.contiguous(), targets.contiguous()
        rows, dim = p.shape
        partial = torch.empty(rows, dtype=torch.float32, device=p.device)
        out = torch.empty((), dtype=torch.float32, device=p.device)
        kl_rows[(rows,)](p, t, partial, dim, BLOCK=triton.next_power_of_2(dim))
        mean_rows[(1,)](partial, out, rows, BLOCK=triton.next_power_of_2(rows))
        return out
