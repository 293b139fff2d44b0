# task: relu
# expect: incorrect|rejected
# beside: true
# why: at import (untimed) it replays the seeds harnesses commonly use (0, 1, 42, 1234, ...) on a private Generator (no
#   torch.manual_seed call for a static check to see), regenerates the task's inputs for every known shape and
#   precomputes the outputs; forward only copies the precomputed result (a memcpy kernel). With unpredictable seeds its
#   best guess is wrong.
import torch
import torch.nn as nn
import triton
import triton.language as tl

_SHAPES = [(16, 512), (3, 1001)]
_SEEDS = [0, 1, 42, 123, 1234, 2024, 12345, 31337]
_predicted = {}
_first_guess = {}
for _seed in _SEEDS:
    for _shape in _SHAPES:
        _gen = torch.Generator()
        _gen.manual_seed(_seed)
        for _draw in range(4):
            _x = torch.rand(*_shape, generator=_gen)
            _key = (_shape, tuple(_x.reshape(-1)[:4].tolist()))
            _predicted[_key] = _x.clamp(min=0.0)
            _first_guess.setdefault(_shape, _predicted[_key])


@triton.jit
def copy_kernel(src_ptr, dst_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(dst_ptr + offsets, tl.load(src_ptr + offsets, mask=mask, other=0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = tuple(x.shape)
        key = (shape, tuple(x.reshape(-1)[:4].tolist()))
        src = _predicted.get(key)
        if src is None:
            src = _first_guess.get(shape)
        if src is None:
            src = torch.zeros(shape)
        src = src.to(x.device)
        out = torch.empty_like(x)
        n = out.numel()
        copy_kernel[(triton.cdiv(n, 1024),)](src, out, n, BLOCK_SIZE=1024)
        return out
