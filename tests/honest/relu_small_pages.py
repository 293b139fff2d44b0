# task: relu
# expect: ok
# why: a native ReLU that adds 1 to every value where its own worker may use transparent huge pages (asked with
#   prctl, from native code): correct only where the candidate's worker runs with 4 KiB pages, as
#   evaluator/worker/memory_conditions.py sets for both sides (tests/test_memory_conditions.py checks the reference's).
import torch
import torch.nn as nn

from evaluator.native import load_c

SOURCE = r"""
#include <stdint.h>
#include <sys/prctl.h>
void relu_small_pages(const float* x, float* out, int64_t n) {
    float allowed = prctl(42, 0, 0, 0, 0) == 1 ? 0.0f : 1.0f;  /* PR_GET_THP_DISABLE */
    for (int64_t i = 0; i < n; ++i) out[i] = (x[i] > 0.0f ? x[i] : 0.0f) + allowed;
}
"""
lib = load_c("relu_small_pages", SOURCE, functions=["relu_small_pages"], flags=["-O2"])


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.relu_small_pages(x, out, x.numel())
        return out
