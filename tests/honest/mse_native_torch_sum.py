# task: mse_loss
# expect: ok
# max-abs-error: 1e-5
# why: honest hybrid loss in native C: the kernel writes each squared difference, torch.sum and one division make
#   the scalar (a scalar that no kernel wrote: PyTorch's final step, half of the reference's reads, is glue)
import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <stdint.h>
void squared_diff(const float* restrict x, const float* restrict y, float* restrict out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) { float d = x[i] - y[i]; out[i] = d * d; }
}
"""
lib = load_c("mse_sqdiff", SOURCE, functions=["squared_diff"], flags=["-O2"])


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x, y = x.contiguous(), y.contiguous()
        sq = torch.empty_like(x)
        lib.squared_diff(x, y, sq, x.numel())
        return torch.sum(sq) / x.numel()
