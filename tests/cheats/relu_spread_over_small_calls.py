# task: relu
# expect: rejected
# beside: true
# why: the reference's operator spread over many small PyTorch calls beside a token Triton kernel: clamp_min on
#   64 slices, each far below the output's size, whose reads add up to all of the reference's (the rule for
#   PyTorch inside a candidate sums every compute operator of the call)
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def touch(out_ptr):
    tl.store(out_ptr, 0.0)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.contiguous().reshape(-1)
        scratch = torch.empty(1, dtype=x.dtype)
        touch[(1,)](scratch)
        step = max(1, flat.numel() // 64)
        parts = [torch.clamp_min(flat[i:i + step], 0.0) for i in range(0, flat.numel(), step)]
        return torch.cat(parts).reshape(x.shape)
