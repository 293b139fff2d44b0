"""Peak memory on the CPU, read by the driver from each worker's process (`evaluator/measure/cpu_memory.py`): a native kernel
that allocates an extra buffer per call reads that buffer's size more than an honest one, both sides are measured, and
the reader of /proc works on a process of this test's own."""

from __future__ import annotations

import mmap
import os
from pathlib import Path

import pytest

from evaluator import Candidate, EvalConfig, Status, load_task
from evaluator import evaluate
from evaluator.measure.cpu_memory import ProcessPeak

TESTS = Path(__file__).resolve().parent
CONFIG = EvalConfig(run_timeout_s=30, compile_timeout_s=60, max_timing_s=0.3)
EXTRA_BYTES = 32 * 2**20

NATIVE_RELU = '''
import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#define EXTRA_BYTES_PER_CALL 0
void relu(const float* x, float* out, int64_t n) {
    char* scratch = EXTRA_BYTES_PER_CALL ? (char*)malloc(EXTRA_BYTES_PER_CALL) : 0;
    if (scratch) memset(scratch, 1, EXTRA_BYTES_PER_CALL);  /* written: resident */
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] > 0 ? x[i] : 0;
    if (scratch) out[0] += scratch[EXTRA_BYTES_PER_CALL - 1] - 1;
    free(scratch);
}
"""
lib = load_c("relu_scratch", SOURCE, functions=["relu"], flags=["-O2"])


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        lib.relu(x.contiguous(), out, x.numel())
        return out
'''


@pytest.fixture
def native_cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("OPFORGE_NATIVE_BUILD_CACHE", str(tmp_path / "native-cache"))
    return tmp_path / "native-cache"


def test_the_reader_sees_this_process_grow_and_resets_its_mark():
    peak = ProcessPeak(os.getpid())
    try:
        before = peak.reset()
    except OSError as exc:
        pytest.skip(f"this process's peak resident set cannot be reset here ({exc})")
    # A fresh anonymous mapping, resident only once written: not the C heap, whose freed memory this process may
    # keep resident (`heap.keep_freed_memory`, which another test in the same process can have called)
    block = mmap.mmap(-1, EXTRA_BYTES)
    block[::4096] = b"\1" * len(block[::4096])
    grown = peak.high_water_bytes() - before
    assert 0.9 * EXTRA_BYTES <= grown <= 1.1 * EXTRA_BYTES + 2**20
    assert peak.resident_bytes() >= before + 0.9 * EXTRA_BYTES
    block.close()
    after_reset = peak.reset()
    assert after_reset < before + 0.5 * EXTRA_BYTES  # the block is gone (a fresh mmap, unmapped on free)


def test_an_extra_buffer_per_call_reads_within_ten_percent_of_its_size(native_cache):
    if os.geteuid() != 0:
        pytest.skip("a worker is undumpable: only root's driver can reset its peak resident set")
    task = load_task(TESTS / "tasks" / "relu_sized.py")
    honest = evaluate(task, Candidate.from_source(NATIVE_RELU), CONFIG)
    extra = evaluate(task, Candidate.from_source(NATIVE_RELU.replace(
        "EXTRA_BYTES_PER_CALL 0", f"EXTRA_BYTES_PER_CALL {EXTRA_BYTES}")), CONFIG)
    assert honest.status == Status.OK and extra.status == Status.OK, (honest.reason, extra.reason)
    assert honest.peak_memory_bytes is not None and extra.peak_memory_bytes is not None
    assert honest.reference_peak_memory_bytes is not None and extra.reference_peak_memory_bytes is not None
    output_bytes = 512 * 2048 * 4  # relu_sized's (ROWS, COLS) float output, held when the mark is read
    assert abs(honest.peak_memory_bytes - output_bytes) <= 0.1 * output_bytes + 2**20, honest.peak_memory_bytes
    assert abs(extra.peak_memory_bytes - honest.peak_memory_bytes - EXTRA_BYTES) <= 0.1 * EXTRA_BYTES, (
        extra.peak_memory_bytes, honest.peak_memory_bytes)
    # The reference (torch.relu: its output) is measured alike on both evaluations.
    assert abs(honest.reference_peak_memory_bytes - output_bytes) <= 0.1 * output_bytes + 2**20


CHEAT_RELU = '''
import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
void relu(const float* x, float* out, int64_t n) {
    /* a scratch buffer of its own pages, given back before the call returns, then the process's mark reset to what
       it holds now: without the sandbox the mark would read the call's output alone */
    char* scratch = (char*)mmap(0, SCRATCH_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (scratch != MAP_FAILED) memset(scratch, 1, SCRATCH_BYTES);
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] > 0 ? x[i] : 0;
    if (scratch != MAP_FAILED) munmap(scratch, SCRATCH_BYTES);
    int fd = open("/proc/self/clear_refs", O_WRONLY);
    if (fd >= 0) { if (write(fd, "5", 1) < 0) {} close(fd); }
}
"""
lib = load_c("relu_reset_peak", SOURCE, functions=["relu"], flags=["-O2"])


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        lib.relu(x.contiguous(), out, x.numel())
        return out
'''


def test_a_kernel_that_resets_its_own_peak_still_reads_its_buffer(native_cache):
    """Native code that writes "5" to its own /proc/self/clear_refs after unmapping its scratch (the reset the driver
    uses, which would lower the mark to what the process holds after the call) is denied it by the sandbox."""
    if os.geteuid() != 0:
        pytest.skip("a worker is undumpable: only root's driver can reset its peak resident set")
    source = CHEAT_RELU.replace("SCRATCH_BYTES", str(EXTRA_BYTES))
    result = evaluate(load_task(TESTS / "tasks" / "relu_sized.py"), Candidate.from_source(source), CONFIG)
    if result.status == Status.OK:
        assert result.peak_memory_bytes is not None and result.peak_memory_bytes >= 0.9 * EXTRA_BYTES, (
            result.peak_memory_bytes)
    else:
        assert result.status in (Status.REJECTED, Status.RUNTIME_ERROR), result.reason


def test_a_driver_that_cannot_reset_the_mark_samples_the_resident_set_instead(native_cache, monkeypatch):
    """A driver that is not root cannot write an undumpable worker's clear_refs (EACCES; its statm stays readable):
    the reset is refused here as it is there, and the figures come from sampling each worker's resident set while
    its calls run, said in the verdict. The extra buffer is still seen within 10%."""
    from evaluator.measure import cpu_memory

    def refused(self: ProcessPeak) -> int:
        raise PermissionError(13, "Permission denied", str(self.clear_refs))

    monkeypatch.setattr(cpu_memory.ProcessPeak, "reset", refused)
    task = load_task(TESTS / "tasks" / "relu_sized.py")
    honest = evaluate(task, Candidate.from_source(NATIVE_RELU), CONFIG)
    extra = evaluate(task, Candidate.from_source(NATIVE_RELU.replace(
        "EXTRA_BYTES_PER_CALL 0", f"EXTRA_BYTES_PER_CALL {EXTRA_BYTES}")), CONFIG)
    assert honest.status == Status.OK and extra.status == Status.OK, (honest.reason, extra.reason)
    assert "peak memory sampled by the driver" in extra.reason and "no peak memory" not in extra.reason
    assert honest.peak_memory_bytes is not None and extra.peak_memory_bytes is not None
    assert extra.reference_peak_memory_bytes is not None and extra.reference_peak_memory_bytes > 0
    assert abs(extra.peak_memory_bytes - honest.peak_memory_bytes - EXTRA_BYTES) <= 0.1 * EXTRA_BYTES, (
        extra.peak_memory_bytes, honest.peak_memory_bytes)


def test_the_sampler_reads_this_process_grow_through_one_descriptor():
    sampler = ProcessPeak(os.getpid()).sampler()
    try:
        before = sampler.resident_bytes()
        block = mmap.mmap(-1, EXTRA_BYTES)
        block[::4096] = b"\1" * len(block[::4096])
        assert sampler.resident_bytes() >= before + 0.9 * EXTRA_BYTES
        reads = []
        assert sampler.largest_until(lambda: reads.append(1) or len(reads) > 3) >= before + 0.9 * EXTRA_BYTES
        block.close()
    finally:
        sampler.close()
