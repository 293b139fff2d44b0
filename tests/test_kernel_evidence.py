"""Units of the evidence that kernels did the work: the store ledger, the observer of PyTorch work, the probes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from evaluator.correctness import compare
from evaluator.worker.kernel_stores import CopyGrants, StoreLedger
from evaluator.worker.observer import CallObserver
from evaluator.worker.task_runtime import _redraw


def _store(ledger: StoreLedger, t: torch.Tensor, values: torch.Tensor, mask: np.ndarray | None = None) -> None:
    ptrs = t.data_ptr() + np.arange(t.numel(), dtype=np.uint64) * t.element_size()
    ledger.record_elements(ptrs, values.reshape(-1).numpy(), mask)


def test_ledger_counts_only_bytes_a_kernel_stored_and_that_still_hold():
    ledger = StoreLedger()
    out = torch.zeros(8)
    ledger.begin()
    assert ledger.uncovered(out) == 8
    values = torch.arange(8, dtype=torch.float32)
    out.copy_(values)
    _store(ledger, out, values, np.array([True] * 6 + [False] * 2))
    assert ledger.uncovered(out) == 2  # two lanes masked off
    _store(ledger, out, values)
    assert ledger.uncovered(out) == 0
    out[3] = 100.0  # written after the kernel, by something else
    assert ledger.uncovered(out) == 1
    assert ledger.uncovered(out[4:].view(2, 2)) == 0  # views of covered bytes are covered
    ledger.end()
    assert ledger.take_stored() == 8 * 4 * 2 - 2 * 4


def test_copy_grants_extend_to_copies_and_fills_not_to_compute():
    ledger = StoreLedger()
    ledger.begin()
    src = torch.arange(6, dtype=torch.float32).view(2, 3)
    _store(ledger, src, src)
    with CopyGrants(ledger):
        copied = src.t().contiguous()
        cast = src.double()
        zeros = torch.zeros(5)
        computed = src * 2
    ledger.end()
    assert ledger.uncovered(copied) == 0 and ledger.uncovered(cast) == 0 and ledger.uncovered(zeros) == 0
    assert ledger.uncovered(computed) == 6


def test_observer_judges_compute_by_size_not_name():
    x = torch.randn(64, 64)
    with CallObserver() as seen:
        y = torch.einsum("ij,jk->ik", x, x)
    found = seen.compute_at_scale([y], [x]) or []
    assert {"aten::bmm", "aten::mm"} & set(found), found
    with CallObserver() as seen:
        y = x.t().contiguous().view(-1)[:10].clone()
    assert seen.compute_at_scale([x], [x]) == []  # layout and copies only
    chunks = []
    with CallObserver() as seen:
        for part in x.split(8):  # small chunks add up
            chunks.append(part.relu())
    assert seen.compute_at_scale([x], [x])
    partials = torch.randn(16)
    with CallObserver() as seen:
        total = partials.sum()  # a final reduction over a few partial sums of a large input
    assert seen.compute_at_scale([total], [torch.empty(16, 4096)]) == []


def test_redraw_keeps_equal_entries_equal():
    half = torch.rand(4, 8)
    table = torch.cat([half, half], dim=-1)
    gen = torch.Generator().manual_seed(3)
    fresh = _redraw(table, gen, 4.0)
    assert torch.equal(fresh[:, :8], fresh[:, 8:])
    assert not torch.equal(fresh, table)
    assert float(fresh.abs().max()) > 1.0


@pytest.mark.parametrize("error, ok", [(0.06, True), (5e4, False)])
def test_large_trial_tolerance_scales_with_the_output(error: float, ok: bool):
    expected = torch.tensor([4e5, -3e5, 1.0])
    got = expected.clone()
    got[2] += error
    assert compare([expected], [got], scaled_atol=True).ok is ok
    assert not compare([expected], [got]).ok


def test_observer_follows_forked_tasks_and_refuses_a_restarted_profiler():
    """The observer's profiler (its CPU-only state, entered directly) sees work handed to PyTorch's inter-op pool,
    and a call that switches it off and on again loses the harness's marker: judged as tampered (None)."""
    x = torch.randn(4096)
    with CallObserver() as seen:
        y = torch.jit.wait(torch.jit.fork(torch.relu, x))
    assert "aten::relu" in (seen.compute_at_scale([y], [x]) or [])
    config = torch.autograd.ProfilerConfig(torch.autograd.ProfilerState.CPU, True, False, False, False, False,
                                           torch._C._profiler._ExperimentalConfig())
    with CallObserver() as seen:
        torch.autograd._disable_profiler_legacy()
        y = torch.relu(x)
        torch.autograd._enable_profiler_legacy(config)
    assert seen.compute_at_scale([y], [x]) is None
    with CallObserver() as seen:
        torch.autograd._disable_profiler_legacy()
        y = torch.relu(x)
    assert seen.compute_at_scale([y], [x]) is None
    assert not torch.autograd._profiler_enabled()
