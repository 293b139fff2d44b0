# task: relu
# expect: rejected|incorrect
# beside: true
# why: replaces one builtin only, vars (the builtins module reached through print.__self__), which the harness's own
#   check that the builtins are unchanged calls first after the call: the hook finishes the output with a native
#   kernel and puts vars back before the check compares anything, so the check finds the builtins as they were
#   (issue 33, class 7: a self-removing builtins hook that runs inside the check meant to catch it)
import torch
import torch.nn as nn
from evaluator.native import load_c

_SRC = r"""
#include <stdint.h>
void relu(const float* x, float* out, int64_t n) { for (int64_t i = 0; i < n; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f; }
void copy(const float* x, float* out, int64_t n) { for (int64_t i = 0; i < n; ++i) out[i] = x[i]; }
"""
lib = load_c("relu_builtins_vars_hook", _SRC, functions=["relu", "copy"], flags=["-O2"])

HOME = getattr(print, "__se" + "lf__")
TABLE = getattr(HOME, "__di" + "ct__")
NAMES = ("vars",)
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
