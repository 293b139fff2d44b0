# task: relu
# expect: rejected
# beside: true
# why: returns a namedtuple (a tuple subclass) whose __len__ and __getitem__ run the native kernel before they answer:
#   a harness that sized or indexed the result instead of iterating it would run the work after the timer; the
#   timed call writes one element (issue 33, class 7: a deferred container reached through other protocols than
#   __iter__)
import collections

import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <stdint.h>
void relu(const float* x, float* out, int64_t n) { for (int64_t i = 0; i < n; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f; }
"""
lib = load_c("relu_namedtuple", SOURCE, functions=["relu"], flags=["-O2"])
_Base = collections.namedtuple("Result", ["out"])
PENDING = []


def _finish():
    while PENDING:
        x, out = PENDING.pop()
        lib.relu(x, out, x.numel())


class Result(_Base):
    def __len__(self):
        _finish()
        return 1

    def __getitem__(self, i):
        _finish()
        return tuple.__getitem__(self, i)

    def __iter__(self):
        _finish()
        return tuple.__iter__(self)


class ModelNew(nn.Module):
    def forward(self, x):
        _finish()
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.relu(x, out, 1)
        PENDING.append((x, out))
        return Result(out)
