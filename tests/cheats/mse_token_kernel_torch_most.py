# task: mse_loss
# expect: rejected
# beside: true
# why: a token native kernel beside PyTorch doing most of the work: the kernel only subtracts, PyTorch squares and
#   averages (reads 1.5 times what the reference's mse_loss reads), so kernels do not do the reference's work
import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <stdint.h>
void sub(const float* x, const float* y, float* out, int64_t n) { for (int64_t i = 0; i < n; ++i) out[i] = x[i] - y[i]; }
"""
lib = load_c("mse_sub_only", SOURCE, functions=["sub"], flags=["-O2"])


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x, y = x.contiguous(), y.contiguous()
        d = torch.empty_like(x)
        lib.sub(x, y, d, x.numel())
        return (d * d).mean()
