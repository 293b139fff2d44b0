# task: linear
# expect: ok
# max-abs-error: 1e-4
# why: honest native C linear that keeps the weight in a transposed (in_features, out_features) layout made on the
#   first forward and remade only when the weight's version or storage changes (the loaded weights arrive after
#   __init__), then runs one kernel over rows with the bias fused: state held between calls that is the weights'
#   layout, not an earlier call's answer
import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <stdint.h>
void transpose(const float* w, float* wt, int64_t n, int64_t k) {
    for (int64_t j = 0; j < n; ++j)
        for (int64_t p = 0; p < k; ++p) wt[p * n + j] = w[j * k + p];
}
void linear_kn(const float* x, const float* wt, const float* b, float* out, int64_t m, int64_t n, int64_t k) {
    for (int64_t i = 0; i < m; ++i) {
        float* row = out + i * n;
        for (int64_t j = 0; j < n; ++j) row[j] = b[j];
        for (int64_t p = 0; p < k; ++p) {
            float a = x[i * k + p];
            const float* w = wt + p * n;
            for (int64_t j = 0; j < n; ++j) row[j] += a * w[j];
        }
    }
}
"""
lib = load_c("linear_cached_kn", SOURCE, functions=["transpose", "linear_kn"], flags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self._wt = None
        self._made_from = None

    def _weight_kn(self) -> torch.Tensor:
        w = self.linear.weight.detach()
        stamp = (w.data_ptr(), w._version, tuple(w.shape))
        if self._wt is None or self._made_from != stamp:
            w = w.contiguous()
            self._wt = torch.empty(w.shape[1], w.shape[0], dtype=w.dtype)
            lib.transpose(w, self._wt, w.shape[0], w.shape[1])
            self._made_from = stamp
        return self._wt

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        wt = self._weight_kn()
        b = self.linear.bias.detach().contiguous()
        out = torch.empty(x.shape[0], wt.shape[1], dtype=x.dtype)
        lib.linear_kn(x, wt, b, out, x.shape[0], wt.shape[1], x.shape[1])
        return out
