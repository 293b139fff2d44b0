"""`call_checks.same_bits`, the check that a call left its inputs unchanged (issue 18): compared as the widest integer words
that tile both tensors' bytes, its verdict must stay the byte-by-byte one for every size, offset and dtype."""

from __future__ import annotations

import pytest
import torch

from evaluator.worker.call_checks import same_bits


def _bytewise(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and bytes(a.contiguous().reshape(-1).view(torch.uint8).tolist()) \
        == bytes(b.contiguous().reshape(-1).view(torch.uint8).tolist())


@pytest.mark.parametrize("n", [1, 2, 3, 5, 7, 8, 9, 12, 13, 16, 17, 1001])
@pytest.mark.parametrize("dtype", [torch.uint8, torch.int16, torch.float16, torch.float32, torch.float64,
                                   torch.bool, torch.complex64])
def test_any_one_changed_byte_is_seen_whatever_the_size_and_dtype(n: int, dtype: torch.dtype):
    g = torch.Generator().manual_seed(n)
    a = torch.randint(0, 2 if dtype == torch.bool else 100, (n,), generator=g).to(dtype)
    assert same_bits(a, a.clone())
    raw = a.reshape(-1).view(torch.uint8)
    for spot in {0, raw.numel() // 2, raw.numel() - 1}:
        b = a.clone()
        b.reshape(-1).view(torch.uint8)[spot] ^= 1
        assert same_bits(a, b) is _bytewise(a, b) is False


def test_views_at_odd_offsets_and_strides_are_compared_by_their_own_bytes():
    base = torch.randn(1001)
    a, b = base[1:], base.clone()[1:]  # storage offsets of 4 bytes: no 8-byte words
    assert same_bits(a, b)
    b[-1] += 1
    assert not same_bits(a, b)
    t = torch.randn(64, 33).t()  # not contiguous
    assert same_bits(t, t.clone())
    u = t.clone()
    u[5, 7] = -u[5, 7]
    assert not same_bits(t, u)


def test_bits_not_values_are_compared():
    assert not same_bits(torch.tensor([0.0]), torch.tensor([-0.0]))  # equal values, other bits
    nan = torch.tensor([float("nan")] * 3)
    assert same_bits(nan, nan.clone())  # NaN is not equal to itself, but its bits are
    assert same_bits(torch.tensor(1.5), torch.tensor(1.5)) and not same_bits(torch.tensor(1.5), torch.tensor(2.5))
    assert not same_bits(torch.zeros(4), torch.zeros(2, 2)) and not same_bits(torch.zeros(4), torch.zeros(4).double())
    assert same_bits(torch.empty(0), torch.empty(0))
