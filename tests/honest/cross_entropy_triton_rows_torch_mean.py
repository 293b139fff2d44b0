# task: cross_entropy
# expect: ok
# max-abs-error: 1e-5
# why: honest hybrid loss (Liger-Kernel's cross-entropy style): a Triton kernel computes each row's logsumexp minus
#   the target's logit, torch.mean of the per-row losses is the final step (1/classes of the reference's reads)
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_loss(logits_ptr, target_ptr, out_ptr, classes, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    i = tl.arange(0, BLOCK)
    mask = i < classes
    z = tl.load(logits_ptr + row * classes + i, mask=mask, other=-float("inf"))
    m = tl.max(z, axis=0)
    lse = m + tl.log(tl.sum(tl.exp(z - m), axis=0))
    t = tl.load(target_ptr + row)
    zt = tl.load(logits_ptr + row * classes + t)
    tl.store(out_ptr + row, lse - zt)


class ModelNew(nn.Module):
    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        logits = logits.contiguous()
        rows, classes = logits.shape
        losses = torch.empty(rows, dtype=logits.dtype)
        row_loss[(rows,)](logits, target.contiguous(), losses, classes, BLOCK=triton.next_power_of_2(classes))
        return torch.mean(losses)
