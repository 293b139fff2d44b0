# task: cross_entropy
# expect: ok
# max-abs-error: 1e-5
# why: honest hybrid loss in native C: the kernel computes each row's logsumexp (in double) minus the target's
#   logit, torch.mean averages the per-row losses (a small final step beside the kernel's work)
import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <math.h>
#include <stdint.h>
void row_loss(const float* z, const int64_t* target, float* out, int64_t rows, int64_t classes) {
    for (int64_t r = 0; r < rows; ++r) {
        const float* row = z + r * classes;
        float m = row[0];
        for (int64_t c = 1; c < classes; ++c) m = row[c] > m ? row[c] : m;
        double s = 0.0;
        for (int64_t c = 0; c < classes; ++c) s += exp((double)row[c] - m);
        out[r] = (float)(m + log(s) - row[target[r]]);
    }
}
"""
lib = load_c("ce_rows", SOURCE, functions=["row_loss"], flags=["-O2"])


class ModelNew(nn.Module):
    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        logits, target = logits.contiguous(), target.contiguous()
        rows, classes = logits.shape
        losses = torch.empty(rows, dtype=logits.dtype)
        lib.row_loss(logits, target, losses, rows, classes)
        return torch.mean(losses)
