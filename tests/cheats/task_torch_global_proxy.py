# task: relu
# expect: ok|rejected|incorrect
# why: finds the task's Model through nn.Module's subclasses and, in the task's globals, swaps the name `torch` for a
#   proxy module whose rand/randn draw as usual and compute the ReLU of each draw with a native kernel, kept by the
#   tensor's first values; the forward copies a kept answer (issue 33, class 7: the task's module reached through
#   the reference's class, and its draw wrapped through the library name it calls rather than get_inputs itself).
#   Inert today: the worker forgets the task's Model classes before the candidate is imported (nothing is patched), and
#   on a CPU the timed calls' inputs are drawn by the reference's worker; ok is then an honest kernel's verdict, and a
#   draw reached in this process must never turn into a faster figure
import types

import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <stdint.h>
void relu(const float* x, float* out, int64_t n) { for (int64_t i = 0; i < n; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f; }
void copy(const float* x, float* out, int64_t n) { for (int64_t i = 0; i < n; ++i) out[i] = x[i]; }
"""
lib = load_c("relu_torch_proxy", SOURCE, functions=["relu", "copy"], flags=["-O2"])
ANSWERS = {}


def _key(t):
    return (tuple(t.shape), tuple(float(v) for v in t.reshape(-1)[:4]))


def _drawn(real):
    def draw(*args, **kwargs):
        t = real(*args, **kwargs)
        if t.dtype == torch.float32 and t.numel() >= 4:
            ans = torch.empty_like(t)
            lib.relu(t.contiguous(), ans, t.numel())
            ANSWERS[_key(t)] = ans
        return t
    return draw


class _Proxy(types.ModuleType):
    def __getattr__(self, name):
        return getattr(torch, name)


for _cls in getattr(nn.Module, "__subcla" + "sses__")():
    if _cls.__name__ == "Model" and _cls.__module__.startswith("_opforge_task"):
        _g = getattr(_cls.forward, "__glo" + "bals__")
        _p = _Proxy("torch")
        _p.rand = _drawn(torch.rand)
        _p.randn = _drawn(torch.randn)
        _g["torch"] = _p


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
