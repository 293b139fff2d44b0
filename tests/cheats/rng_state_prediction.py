# task: relu
# expect: incorrect|rejected
# beside: true
# why: reads the global RNG state at import (torch.get_rng_state reached through getattr; a harness that seeds before
#   importing the candidate and draws inputs later in the same process is fully predictable), replays the next draws for
#   every known shape on a private Generator and precomputes their outputs; it also re-seeds the global RNG so that a
#   harness that never re-seeds draws inputs the candidate already knows. Forward copies the precomputed result; with
#   inputs seeded freshly per trial the guess is wrong.
import torch
import torch.nn as nn
import triton
import triton.language as tl

_SHAPES = [(16, 512), (3, 1001)]
_get_state = getattr(torch, "get_rng_" + "state")
_reseed = getattr(torch, "manual_" + "seed")
_predicted = {}
_first_guess = {}


def _replay(state):
    for shape in _SHAPES:
        g = torch.Generator()
        g.set_state(state)
        for _ in range(16):
            x = torch.rand(*shape, generator=g)
            key = (shape, tuple(x.reshape(-1)[:4].tolist()))
            _predicted[key] = x.clamp(min=0.0)
            _first_guess.setdefault(shape, _predicted[key])


_replay(_get_state())
_reseed(271828)
_replay(_get_state())


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
        src = _predicted.get((shape, tuple(x.reshape(-1)[:4].tolist())))
        if src is None:
            src = _first_guess.get(shape)
        if src is None:
            src = torch.zeros(shape)
        src = src.to(x.device)
        out = torch.empty_like(x)
        n = out.numel()
        copy_kernel[(triton.cdiv(n, 1024),)](src, out, n, BLOCK_SIZE=1024)
        return out
