# task: relu
# expect: rejected|incorrect
# beside: true
# why: replaces torch.rand and torch.randn in the torch module's own namespace (its __dict__ reached by a string) with
#   wrappers that, whenever the task's get_inputs draws a tensor, compute its ReLU and keep it under the tensor's
#   first values and shape; the forward then copies a kept answer (issue 33, class 7: the input generator wrapped
#   through the library the task calls rather than the task's globals)
import torch
import torch.nn as nn
from evaluator.native import load_c

_SRC = r"""
#include <stdint.h>
void relu(const float* x, float* out, int64_t n) { for (int64_t i = 0; i < n; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f; }
void copy(const float* x, float* out, int64_t n) { for (int64_t i = 0; i < n; ++i) out[i] = x[i]; }
"""
lib = load_c("relu_rand_wrapped", _SRC, functions=["relu", "copy"], flags=["-O2"])

ANSWERS = {}


def _key(t):
    flat = t.reshape(-1)
    return (tuple(t.shape), tuple(float(v) for v in flat[:4]))


def _wrap(real):
    def drawing(*args, **kwargs):
        t = real(*args, **kwargs)
        if isinstance(t, torch.Tensor) and t.dtype == torch.float32 and t.numel() >= 4:
            ans = torch.empty_like(t)
            lib.relu(t.contiguous(), ans, t.numel())
            ANSWERS[_key(t)] = ans
        return t
    return drawing


_NS = getattr(torch, "__di" + "ct__")
for _name in ("rand", "randn"):
    _NS[_name] = _wrap(_NS[_name])


class ModelNew(nn.Module):
    def forward(self, x):
        kept = ANSWERS.pop(_key(x), None) if x.numel() >= 4 else None
        x = x.contiguous()
        out = torch.empty_like(x)
        if kept is not None:
            lib.copy(kept, out, x.numel())
        else:
            lib.relu(x, out, x.numel())
        return out
