# task: ordered_weighted_average
# expect: ok
# max-abs-error: 1e-5
# why: honest native C: torch.sort orders each row (a sort feeding a kernel), the kernel computes each row's
#   rank-weighted sum
import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <stdint.h>
void weighted_rows(const float* x, const float* w, float* out, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) {
        float s = 0.0f;
        for (int64_t c = 0; c < cols; ++c) s += x[r * cols + c] * w[c];
        out[r] = s;
    }
}
"""
lib = load_c("owa_rows", SOURCE, functions=["weighted_rows"], flags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self, cols: int):
        super().__init__()
        ranks = torch.arange(cols, dtype=torch.float32)
        self.register_buffer("weights", torch.softmax(-((ranks - cols / 2) ** 2) / cols, dim=0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ordered = torch.sort(x, dim=-1).values.contiguous()
        rows, cols = ordered.shape
        out = torch.empty(rows, dtype=x.dtype)
        lib.weighted_rows(ordered, self.weights.contiguous(), out, rows, cols)
        return out
