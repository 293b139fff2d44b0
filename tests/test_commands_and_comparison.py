"""The wire commands declared once, the channel's receive buffer, the single-precision comparison and the redraw of
input values: what makes correctness trials cheaper must not change a verdict."""

from __future__ import annotations

import json
import socket
import struct

import pytest
import torch

from evaluator.worker import task_runtime
from evaluator.wire import frames as wire
from evaluator.wire.commands import Batch, Built, Exit, Load, NextCall, Run, Time, UnknownCommand, parse
from evaluator.correctness import CHUNK_VALUES, compare
from evaluator.worker.task_runtime import _redraw
from evaluator.wire.frames import Channel, ChannelClosed


@pytest.mark.parametrize("cmd", [
    Load(task_source="x", task_name="t", device="cpu", init_seeds=(1, 2), candidate_source="y", builds=True),
    Run(variant=1, seed=5, distribution="large", scale=1e5, prime_seed=3, reuse_tensors=True),
    Time(variant=0, seed=9, warmup_ms=5.0), NextCall(next_seed=None, check=True),
    Batch(variant=0, seeds=(1, 2, 3), calls=True), Exit(), Built("linked", "log", "k", True),
])
def test_a_command_survives_the_wire_as_itself(cmd):
    header = json.loads(json.dumps({**cmd.to_wire(), "nonce": "n"}))  # as Channel sends and receives it
    assert parse(header) == cmd


@pytest.mark.parametrize("header, words", [
    ({"cmd": "rnu", "variant": 0, "seed": 1}, "unknown command 'rnu'"),
    ({"cmd": "run", "variant": 0, "sede": 1}, "'run'"),
    ({"variant": 0}, "unknown command None"),
])
def test_a_misspelt_command_or_field_is_refused_by_name(header, words):
    with pytest.raises(UnknownCommand, match=words):
        parse(header)


def test_a_frame_is_received_whole_whatever_the_first_buffer(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(wire, "FIRST_BUFFER_BYTES", 100)  # every tensor below grows its buffer
    a, b = socket.socketpair()
    sent = [torch.randn(70, 33), torch.tensor(3.0), torch.arange(1000, dtype=torch.int64)]
    Channel(a, "n").send({"status": "ran"}, sent)
    _, got = Channel(b, "n").recv(timeout_s=5)
    assert all(torch.equal(x, y) and x.dtype == y.dtype for x, y in zip(sent, got))


@pytest.mark.parametrize("first_buffer", [7, wire.FIRST_BUFFER_BYTES])
def test_every_dtype_and_an_empty_tensor_survive_the_wire_as_themselves(monkeypatch: pytest.MonkeyPatch,
                                                                         first_buffer: int):
    """Received into uint8 tensors and viewed as the header's dtype: values, dtypes and shapes come back unchanged, and
    each received tensor owns its memory (writable, not a view of another's)."""
    monkeypatch.setattr(wire, "FIRST_BUFFER_BYTES", first_buffer)
    a, b = socket.socketpair()
    sent = [torch.randn(5, 3).to(dtype) for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16,
                                                       torch.complex64, torch.complex128)]
    sent += [torch.arange(-6, 6).to(dtype).reshape(3, 4) for dtype in (torch.int8, torch.int16, torch.int32,
                                                                          torch.int64)]
    sent += [torch.arange(12, dtype=torch.uint8), torch.tensor([True, False, True]), torch.empty(0, 3)]
    Channel(a, "n").send({"status": "ran"}, sent)
    _, got = Channel(b, "n").recv(timeout_s=5)
    assert [(x.dtype, x.shape) for x in got] == [(x.dtype, x.shape) for x in sent]
    assert all(torch.equal(x, y) for x, y in zip(sent, got))
    got[0].add_(1.0)
    assert not torch.equal(got[0], sent[0]) and torch.equal(got[1], sent[1])


def test_a_header_promising_more_than_arrives_is_a_closed_channel():
    a, b = socket.socketpair()
    head = json.dumps({"nonce": "n", "tensors": [{"dtype": "torch.float32", "shape": [2**30], "nbytes": 2**32}]})
    a.sendall(struct.pack("!Q", len(head)) + head.encode() + b"\0" * 1000)
    a.close()
    with pytest.raises(ChannelClosed):
        Channel(b, "n").recv(timeout_s=5)


def _float64_count_off(e: torch.Tensor, a: torch.Tensor, atol: float, rtol: float) -> int:
    diff = (a.double() - e.double()).abs()
    return int((diff > atol + rtol * e.double().abs()).sum())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_the_single_precision_comparison_counts_what_float64_counts(dtype: torch.dtype):
    """Errors spread across the tolerance's edge: the values off are exactly those float64 finds."""
    gen = torch.Generator().manual_seed(7)
    e = torch.randn(200_000, generator=gen).to(dtype)
    noise = torch.randn(200_000, generator=gen, dtype=torch.float64) * 1e-3 * e.double().abs()
    a = (e.double() + noise).to(dtype)
    verdict = compare([e], [a], {"atol": 1e-4, "rtol": 1e-3})
    expected = _float64_count_off(e, a, 1e-4, 1e-3)
    assert expected > 0 and not verdict.ok
    assert f"off in {expected} of" in verdict.reason


def test_what_lies_in_the_last_chunk_counts_as_much_as_the_first():
    """The single-precision comparison walks outputs in chunks: a NaN, the largest error or the largest value (the
    large-magnitude trial's tolerance) in the last chunk decides as it would anywhere."""
    n = 3 * CHUNK_VALUES + 5
    e = torch.ones(n)
    nan = e.clone()
    nan[-1] = float("nan")
    assert "NaN" in compare([e], [nan]).reason
    off = e.clone()
    off[-2] += 0.5
    verdict = compare([e], [off])
    assert not verdict.ok and verdict.max_abs_error == 0.5 and "off in 1 of" in verdict.reason
    big = e.clone()
    big[-1] = 1e6
    near = big.clone()
    near[0] += 50.0  # beyond atol + rtol * 1 for a plain trial, inside rtol * 1e6 for the large-magnitude one
    assert not compare([big], [near], {"atol": 1e-4, "rtol": 1e-4}).ok
    assert compare([big], [near], {"atol": 1e-4, "rtol": 1e-4}, scaled_atol=True).ok


def test_a_difference_equal_to_the_tolerance_passes_and_one_step_above_fails():
    e = torch.tensor([1.0, 0.0])
    assert compare([e], [torch.tensor([1.0, 2.0**-12])], {"atol": 2.0**-12, "rtol": 0.0}).ok
    assert not compare([e], [torch.tensor([1.0, 2.0**-12 + 2.0**-35])], {"atol": 2.0**-12, "rtol": 0.0}).ok


def test_infinities_and_overflowing_differences_take_the_float64_path():
    big = torch.tensor([3e38, -3e38, 1.0])
    assert not compare([big], [torch.tensor([-3e38, 3e38, 1.0])]).ok  # the float32 difference overflows
    inf = torch.tensor([float("inf"), 1.0])
    assert compare([inf], [inf.clone()]).ok
    assert not compare([inf], [torch.tensor([float("-inf"), 1.0])]).ok


def test_a_redraw_in_chunks_draws_what_one_pass_draws(monkeypatch: pytest.MonkeyPatch):
    """The CPU redraw hashes values chunk by chunk: the draws are those of one pass over the whole input, equal
    values in different chunks included."""
    x = torch.randn(3, 70_001).to(torch.float64)
    x[2, -1] = x[0, 0]  # equal values in the first and the last chunk
    chunked = _redraw(x, torch.Generator().manual_seed(9), 4.0)
    monkeypatch.setattr(task_runtime, "REDRAW_CHUNK_VALUES", x.numel())
    whole = _redraw(x, torch.Generator().manual_seed(9), 4.0)
    assert torch.equal(chunked, whole) and chunked.dtype == torch.float64 and chunked.shape == x.shape
    assert chunked[2, -1] == chunked[0, 0]


def test_a_redraw_is_standard_normal_per_distinct_value_and_follows_the_seed():
    x = torch.randn(200_000)
    fresh = _redraw(x, torch.Generator().manual_seed(1), 4.0)
    assert abs(float(fresh.mean())) < 0.05 and abs(float(fresh.std()) - 4.0) < 0.05
    kurtosis = float(((fresh - fresh.mean()) ** 4).mean() / fresh.var() ** 2)
    assert abs(kurtosis - 3.0) < 0.1  # normal, not uniform (1.8) or heavy-tailed
    assert torch.equal(fresh, _redraw(x, torch.Generator().manual_seed(1), 4.0))
    assert not torch.equal(fresh, _redraw(x, torch.Generator().manual_seed(2), 4.0))
    signed_zeros = _redraw(torch.tensor([0.0, -0.0, 1.0]), torch.Generator().manual_seed(3), 1.0)
    assert signed_zeros[0] == signed_zeros[1] != signed_zeros[2]
