"""evaluator/heap.py: with the C heap kept, a large output freed and allocated again is soon the same memory, not
fresh pages; with glibc's defaults it is fresh pages every time (past 32 MiB glibc maps each allocation afresh). Run
in child processes: the setting is process-wide and would stay with the test session."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROBE = """
import sys
import torch
from evaluator.heap import keep_freed_memory, minor_faults
kept = keep_freed_memory() if sys.argv[1] == "kept" else False
faults = []
for _ in range(16):  # the kept heap settles after a few calls (8 here: allocator bins, small objects between)
    before = minor_faults()
    out = torch.empty(48 << 18)  # 48 MiB of floats, written once as a kernel's output would be
    out.fill_(1.0)
    faults.append(minor_faults() - before)
    del out
print(kept, faults[-1])
"""


def probe(mode: str) -> tuple[bool, int]:
    proc = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    kept, faults = proc.stdout.split()
    return kept == "True", int(faults)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_a_kept_heap_reuses_a_large_output_where_glibc_faults_it_in_afresh():
    kept, kept_faults = probe("kept")
    _, default_faults = probe("glibc")
    assert kept
    assert default_faults >= (48 << 20) // 4096 // 2  # most of the 12,288 pages, every call
    assert kept_faults < 100


RESERVE_PROBE = """
import sys
import torch
from evaluator.heap import keep_freed_memory, minor_faults, reserve
keep_freed_memory()
written = reserve(48 << 20) if sys.argv[1] == "reserve" else 0
before = minor_faults()
out = torch.empty(48 << 18)  # a first 48 MiB output: the heap grows into fresh pages unless they were written
out.fill_(1.0)
print(written, minor_faults() - before)
"""


def reserve_probe(mode: str) -> tuple[int, int]:
    proc = subprocess.run([sys.executable, "-c", RESERVE_PROBE, mode], capture_output=True, text=True, cwd=ROOT,
                          timeout=120, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    written, faults = proc.stdout.split()
    return int(written), int(faults)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_a_reserved_kept_heap_gives_a_first_large_output_written_pages():
    """What a CPU worker does before its first timed calls (worker.py): without it, the first output of each size
    (and any that lands in memory inherited from the zygote) faults in every page inside the timed call."""
    written, reserved_faults = reserve_probe("reserve")
    _, plain_faults = reserve_probe("plain")
    assert written >= 48 << 20
    assert plain_faults >= (48 << 20) // 4096 // 2
    assert reserved_faults < 100


FORKED_PROBE = """
import os
import torch
from evaluator.heap import _free_heap_bytes, keep_freed_memory, minor_faults, reserve
keep_freed_memory()
held = [torch.empty(24 << 18).fill_(1.0) for _ in range(4)]  # 96 MiB the parent writes, then frees: its free heap
del held
if os.fork() == 0:  # a worker forked from its zygote: the free heap is the parent's pages, copy on write
    free = _free_heap_bytes()
    written = reserve(24 << 20)
    before = minor_faults()
    outs = [torch.empty(24 << 18).fill_(2.0) for _ in range(4)]  # first outputs, landing in that free heap
    print(free >= 64 << 20, written >= free, minor_faults() - before, flush=True)
    os._exit(0)
os.wait()
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt, fork")
def test_a_reserve_in_a_forked_worker_copies_the_inherited_free_heap_before_any_timed_call():
    """A worker's free heap is its zygote's pages, shared copy on write: the first write to each faults and copies.
    The reserve makes them the worker's own first (by the kernel, MADV_POPULATE_WRITE, where it can), so outputs
    that land there fault nothing."""
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}  # as a zygote: no pool forked
    proc = subprocess.run([sys.executable, "-c", FORKED_PROBE], capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env=env)
    assert proc.returncode == 0, proc.stderr
    inherited, covered, faults = proc.stdout.split()
    assert inherited == "True" and covered == "True"
    assert int(faults) < 100, faults
