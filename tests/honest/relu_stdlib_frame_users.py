# task: relu
# expect: ok
# max-abs-error: 1e-6
# why: honest Triton kernel whose module uses TypeVar, Generic, namedtuple, the Enum functional API and NewType:
#   the standard library reads its caller's frame for their __module__, which the audit hook must allow.
import collections
import enum
import typing

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.maximum(tl.load(x_ptr + offsets, mask=mask, other=0.0), 0.0), mask=mask)


def launch(x):
    x = x.contiguous()
    out = torch.empty_like(x)
    relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK_SIZE=1024)
    return out
import functools
import dataclasses
from typing import NamedTuple, Optional, TypedDict, Generic, TypeVar
import typing_extensions

T = TypeVar("T")
Launch = collections.namedtuple("Launch", "programs block")
Mode = enum.Enum("Mode", "FAST SAFE")
Elements = typing.NewType("Elements", int)


@dataclasses.dataclass(frozen=True)
class Cfg:
    block: int = 1024
    note: Optional[str] = None


class P(NamedTuple):
    a: int
    b: int


class TD(TypedDict):
    k: int


class Box(Generic[T]):
    pass


@functools.lru_cache(maxsize=None)
def grid_for(n: int, block: int):
    return (triton.cdiv(n, block),)


@functools.wraps(launch)
def wrapped(x):
    return launch(x)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.cfg = dataclasses.replace(Cfg(), note="x")
        self.p = P(1, 2)._replace(b=3)
        Box[int]()
        typing_extensions.TypedDict("X", {"a": int})
        self.part = functools.partial(wrapped)

    def forward(self, x):
        grid_for(x.numel(), self.cfg.block)
        return self.part(x)
