# task: kl_div
# expect: ok
# max-abs-error: 1e-5
# why: honest: PyTorch takes the log of an input (as the reference itself does first), a Triton kernel computes
#   each row's sum of t * (log t - log p), and torch.sum of the row sums over the batch is the final step; the
#   log and the sum read a third of what the reference reads
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def kl_rows(logp_ptr, t_ptr, out_ptr, dim, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    i = tl.arange(0, BLOCK)
    mask = i < dim
    logp = tl.load(logp_ptr + row * dim + i, mask=mask, other=0.0)
    t = tl.load(t_ptr + row * dim + i, mask=mask, other=0.0)
    term = tl.where(t > 0, t * (tl.log(tl.maximum(t, 1e-30)) - logp), 0.0)
    tl.store(out_ptr + row, tl.sum(term, axis=0))


class ModelNew(nn.Module):
    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logp = torch.log(predictions.contiguous())
        t = targets.contiguous()
        rows, dim = t.shape
        partial = torch.empty(rows, dtype=t.dtype)
        kl_rows[(rows,)](logp, t, partial, dim, BLOCK=triton.next_power_of_2(dim))
        return torch.sum(partial) / rows
