# task: relu
# expect: rejected|incorrect
# beside: true
# why: reaches the builtins module through a builtin function's __self__ (len.__self__, no name of the module in the
#   source) and replaces len, max, min, id, hasattr, getattr, iter and sorted in its dict at once; whichever the
#   harness calls first after the call finishes the output with a native kernel and puts every one of them back (issue 33,
#   class 7: a self-removing hook on builtins by another route than a module's __builtins__)
import torch
import torch.nn as nn
from evaluator.native import load_c

_SRC = r"""
#include <stdint.h>
void relu(const float* x, float* out, int64_t n) { for (int64_t i = 0; i < n; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f; }
void copy(const float* x, float* out, int64_t n) { for (int64_t i = 0; i < n; ++i) out[i] = x[i]; }
"""
lib = load_c("relu_builtins_hook", _SRC, functions=["relu", "copy"], flags=["-O2"])

HOME = getattr(len, "__se" + "lf__")
TABLE = getattr(HOME, "__di" + "ct__")
NAMES = ("len", "max", "min", "id", "hasattr", "getattr", "iter", "sorted")
REAL = {name: TABLE[name] for name in NAMES}
PENDING = []


def _restore():
    for name, fn in REAL.items():
        TABLE[name] = fn


def _finish():
    _restore()
    while PENDING:
        x, out = PENDING.pop()
        lib.relu(x, out, x.numel())


def _hooked(name):
    real = REAL[name]

    def hook(*args, **kwargs):
        _finish()
        return real(*args, **kwargs)
    return hook


class ModelNew(nn.Module):
    def forward(self, x):
        _finish()
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.relu(x, out, 1)  # a launch that writes almost nothing
        PENDING.append((x, out))
        for name in NAMES:
            TABLE[name] = _hooked(name)
        return out
