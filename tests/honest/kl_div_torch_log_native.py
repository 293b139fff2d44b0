# task: kl_div
# expect: ok
# max-abs-error: 1e-5
# why: honest native C: PyTorch takes the log of an input (a third of the reference's reads, the reference's own
#   first step), the kernel sums each row's t * (log t - log p) in double, torch.sum over the rows is the last step
import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <math.h>
#include <stdint.h>
void kl_rows(const float* logp, const float* t, float* out, int64_t rows, int64_t dim) {
    for (int64_t r = 0; r < rows; ++r) {
        double s = 0.0;
        for (int64_t i = r * dim; i < (r + 1) * dim; ++i)
            if (t[i] > 0.0f) s += (double)t[i] * (log((double)t[i]) - (double)logp[i]);
        out[r] = (float)s;
    }
}
"""
lib = load_c("kl_rows_logp", SOURCE, functions=["kl_rows"], flags=["-O2"])


class ModelNew(nn.Module):
    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logp = torch.log(predictions.contiguous())
        t = targets.contiguous()
        rows, dim = t.shape
        partial = torch.empty(rows, dtype=t.dtype)
        lib.kl_rows(logp, t, partial, rows, dim)
        return torch.sum(partial) / rows
