# task: kl_div
# expect: ok
# max-abs-error: 1e-5
# why: honest hybrid loss in native C: the kernel writes every element's t * (log t - log p), torch.sum over them
#   divided by the batch is the final step (a third of the reference's reads)
import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <math.h>
#include <stdint.h>
void kl_terms(const float* p, const float* t, float* out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) out[i] = t[i] > 0.0f ? t[i] * (logf(t[i]) - logf(p[i])) : 0.0f;
}
"""
lib = load_c("kl_terms", SOURCE, functions=["kl_terms"], flags=["-O2"])


class ModelNew(nn.Module):
    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        p, t = predictions.contiguous(), targets.contiguous()
        terms = torch.empty_like(p)
        lib.kl_terms(p, t, terms, p.numel())
        return torch.sum(terms) / p.shape[0]
