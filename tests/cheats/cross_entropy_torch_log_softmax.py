# task: cross_entropy
# expect: rejected
# beside: true
# why: PyTorch computes log_softmax (nearly all of the reference's work) and a Triton kernel only picks each row's
#   target entry: a token kernel beside PyTorch doing 90% and more of the reference's reads
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def pick(logp_ptr, target_ptr, out_ptr, classes):
    row = tl.program_id(0)
    t = tl.load(target_ptr + row)
    tl.store(out_ptr + row, -tl.load(logp_ptr + row * classes + t))


class ModelNew(nn.Module):
    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        logp = torch.log_softmax(logits, dim=-1).contiguous()
        rows, classes = logp.shape
        losses = torch.empty(rows, dtype=logits.dtype)
        pick[(rows,)](logp, target.contiguous(), losses, classes)
        return torch.mean(losses)
