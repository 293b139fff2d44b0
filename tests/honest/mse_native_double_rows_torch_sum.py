# task: mse_loss
# expect: ok
# max-abs-error: 1e-5
# why: honest native C with OpenMP over rows: each row's squared differences summed in double into one partial,
#   torch.sum of the row partials and one division make the scalar loss (more exact than PyTorch's float32 sum)
import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <stdint.h>
void row_sq(const float* x, const float* y, float* out, int64_t rows, int64_t cols) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        double s = 0.0;
        for (int64_t c = r * cols; c < (r + 1) * cols; ++c) { double d = (double)x[c] - (double)y[c]; s += d * d; }
        out[r] = (float)s;
    }
}
"""
lib = load_c("mse_rows_omp", SOURCE, functions=["row_sq"], flags=["-O2", "-fopenmp"])


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x, y = x.contiguous(), y.contiguous()
        rows, cols = x.shape
        partial = torch.empty(rows, dtype=x.dtype)
        lib.row_sq(x, y, partial, rows, cols)
        return torch.sum(partial) / x.numel()
