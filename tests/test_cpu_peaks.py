"""The CPU's speed of light: measured with real C kernels, kept in the store once per device, and used by the
leaderboard as the roofline of kernels timed on that CPU (a kernel's fraction of it beside its speedup).
The figures themselves are the benchmark scripts' business; these tests check the mechanism."""

from __future__ import annotations

import dataclasses
import functools
import math

import pytest
import torch
from store_fixtures import CPU, db_url, make_task, ok_result, pg_url, sqlite_url, store

from evaluator import Candidate
from evaluator.device.cpu_peaks import METHOD, CpuPeaks, copy_like, measure_cpu_peaks
from evaluator.device.info import device_info
from evaluator.worker.timing import CallTimer
from opforge.reports.leaderboard import leaderboard
from opforge.run.peaks import ensure_cpu_peaks

__all__ = ["db_url", "pg_url", "sqlite_url", "store"]  # fixtures

SMALL = functools.partial(measure_cpu_peaks, copy_bytes=1 << 20, fma_iters=20_000, repeats=2)


def test_measured_peaks_are_finite_positive_and_use_torchs_thread_count():
    peaks = SMALL()
    assert math.isfinite(peaks.copy_gbps) and peaks.copy_gbps > 0
    assert math.isfinite(peaks.peak_gflops) and peaks.peak_gflops > 0
    assert peaks.threads == torch.get_num_threads()


def test_the_copy_peak_is_timed_as_a_kernel_is_cold_every_call(monkeypatch):
    """The stored copy bandwidth is the bound of kernels timed by `CallTimer` from cold caches: the copy behind it is
    timed the same way, its input evicted before every repeat even when it is small, never bare back to back."""
    evicted: list[bool] = []
    evict = CallTimer.evict

    def recording(self, args):
        evicted.append(evict(self, args))
        return evicted[-1]

    monkeypatch.setattr(CallTimer, "evict", recording)
    peaks = SMALL(copy_repeats=3)
    assert evicted == [True, True, True]  # 1 MiB: below the timer's own bound, evicted all the same
    assert peaks.copy_gbps > 0


def test_copy_like_moves_the_bytes_asked_into_a_fresh_output_each_call():
    """The side-by-side yardstick copies half the bytes and writes as many, into a new tensor each call as a seed
    allocates its result: the bytes it moves are the bytes a task's bound counts."""
    copy, source = copy_like(3 << 20)
    first, second = copy(source), copy(source)
    assert source.numel() * source.element_size() * 2 == 3 << 20
    assert torch.equal(first, source) and torch.equal(second, source)
    assert first.data_ptr() != second.data_ptr() != source.data_ptr()  # a fresh output per call, none kept
    copy, source = copy_like(4)
    assert copy(source).numel() == 1  # never an empty copy


def test_the_store_keeps_one_measurement_per_device_the_newest(store):
    assert store.device_peaks("CPU x") is None
    store.set_device_peaks("CPU x", 10.0, 100.0, 2)
    store.set_device_peaks("CPU y", 20.0, 300.0, 4)
    newer = store.set_device_peaks("CPU x", 12.0, 110.0, 2)
    kept = store.device_peaks("CPU x")
    assert kept == newer and (kept.copy_gbps, kept.peak_gflops, kept.threads) == (12.0, 110.0, 2)
    assert store.device_peaks("CPU y").peak_gflops == 300.0


def test_peaks_are_measured_once_per_device_then_read_back(store):
    here = device_info("cpu").name
    first = ensure_cpu_peaks(store, here, measure=SMALL)
    assert first is not None and first.device == here and first.copy_gbps > 0
    again = ensure_cpu_peaks(store, here, measure=lambda: pytest.fail("measured a second time"))
    assert again == first
    assert ensure_cpu_peaks(store, "NVIDIA H100 80GB HBM3", measure=SMALL) is None  # its datasheet says
    assert store.device_peaks("NVIDIA H100 80GB HBM3") is None


def test_peaks_kept_by_an_older_method_are_measured_again(store):
    here = device_info("cpu").name
    store.set_device_peaks(here, copy_gbps=6.7, peak_gflops=94.0, threads=2)  # a store from before `method` was kept
    fresh = CpuPeaks(copy_gbps=25.0, peak_gflops=350.0, threads=2)
    got = ensure_cpu_peaks(store, here, measure=lambda: fresh)
    assert got is not None and (got.copy_gbps, got.method) == (25.0, METHOD)
    assert store.device_peaks(here) == got
    assert ensure_cpu_peaks(store, here, measure=lambda: pytest.fail("measured again")) == got


def _cpu_bench(store, results: dict[str, object], min_bytes: int, flops: float = 0.0) -> None:
    bench = store.create_bench("tiny", "tune", {"coder": "tune"})
    for i, (name, result) in enumerate(results.items()):
        task = store.add_task(make_task(name, body=f"# {name}\n"))
        store.set_task_work(task.id, flops=flops, min_bytes=min_bytes)
        run = store.create_run(task.id, {"coder": "tune"}, {"max_candidates": 1}, bench_id=bench.id)
        cand, _ = store.add_candidate(run.id, task.id, Candidate.from_source(f"x = {bench.id}_{i}"))
        store.add_result(cand.id, run.id, result, worker_s=1.0)


def test_leaderboard_puts_cpu_kernels_against_the_measured_roofline(store):
    # 20 MB at a measured 10 GB/s: a 2 ms bound. Reference 8 ms; kernels at 4 ms (2x, half the roofline) and 1 ms
    # (faster than the bound: floored, and its fraction says so).
    cpu = dataclasses.replace(CPU, name="CPU test-part")
    _cpu_bench(store, {"half": ok_result(2.0, cpu, reference_ms=8.0), "fast": ok_result(8.0, cpu, reference_ms=8.0)},
               min_bytes=20_000_000)
    [row] = leaderboard(store, "tiny")
    by_task = {t.task: t for t in row.tasks}
    assert all(t.roofline_fraction is None and not t.floored for t in row.tasks)  # no peaks for this CPU yet
    assert row.mean_roofline_fraction is None

    store.set_device_peaks("CPU test-part", copy_gbps=10.0, peak_gflops=100.0, threads=2)
    [row] = leaderboard(store, "tiny")
    by_task = {t.task: t for t in row.tasks}
    assert by_task["half"].roofline_fraction == pytest.approx(0.5) and not by_task["half"].floored
    assert by_task["fast"].roofline_fraction == pytest.approx(2.0) and by_task["fast"].floored
    assert by_task["fast"].speedup == pytest.approx(4.0) and by_task["fast"].raw_speedup == pytest.approx(8.0)
    assert row.mean_roofline_fraction == pytest.approx(1.25)


def test_a_compute_bound_cpu_task_is_bounded_by_the_measured_flops(store):
    cpu = dataclasses.replace(CPU, name="CPU test-part")
    store.set_device_peaks("CPU test-part", copy_gbps=10.0, peak_gflops=100.0, threads=2)
    # 1 GFLOP at 100 GFLOP/s: 10 ms, more than the 1 MB's 0.1 ms; a 40 ms kernel reaches a quarter of it.
    _cpu_bench(store, {"gemm": ok_result(2.0, cpu, reference_ms=80.0)}, min_bytes=1_000_000, flops=1e9)
    [row] = leaderboard(store, "tiny")
    assert row.tasks[0].roofline_fraction == pytest.approx(0.25)
