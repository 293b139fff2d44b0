"""evaluator/worker/heap.py: with the C heap kept, a large output freed and allocated again is soon the same memory, not
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
from evaluator.worker.heap import keep_freed_memory, minor_faults
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
from evaluator.worker.heap import keep_freed_memory, minor_faults, reserve
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
from evaluator.worker.heap import _free_heap_bytes, keep_freed_memory, minor_faults, reserve
keep_freed_memory()
held = [torch.empty(24 << 18).fill_(1.0) for _ in range(4)]  # 96 MiB the parent writes, then frees: its free heap
del held
if os.fork() == 0:  # a worker forked from its zygote: the free heap is the parent's pages, copy on write
    free = _free_heap_bytes()
    written = reserve(24 << 20)
    before = minor_faults()
    out = torch.empty(24 << 18).fill_(2.0)  # a first output and its copy, as a timed call holds them
    copy = out.clone()
    print(free >= 64 << 20, written >= free, minor_faults() - before, flush=True)
    os._exit(0)
os.wait()
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt, fork")
def test_a_reserve_in_a_forked_worker_copies_the_inherited_free_heap_before_any_timed_call():
    """A worker's free heap is its zygote's pages, shared copy on write: the first write to each faults and copies.
    The reserve makes them the worker's own first (by the kernel, MADV_POPULATE_WRITE, where it can), so an output
    and its copy that land there, or past it, fault nothing."""
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}  # as a zygote: no pool forked
    proc = subprocess.run([sys.executable, "-c", FORKED_PROBE], capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env=env)
    assert proc.returncode == 0, proc.stderr
    inherited, covered, faults = proc.stdout.split()
    assert inherited == "True" and covered == "True"
    assert int(faults) < 1000, faults  # small objects; a block written afresh is 6,144 pages



WRITTEN_FREE_PROBE = """
import torch
from evaluator.worker.heap import keep_freed_memory, minor_faults, reserve
keep_freed_memory()
held = [torch.empty(24 << 18).fill_(1.0) for _ in range(8)]  # 192 MiB this process writes, then frees (its trials)
del held
before = minor_faults()
reserve(24 << 20)
print(minor_faults() - before)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_a_reserve_grows_the_heap_by_an_output_and_its_copy_past_the_free_memory_the_process_wrote():
    """A worker that ran its correctness trials first holds free memory it wrote itself; past it the reserve grows
    the heap by two blocks (a timed call's output and its copy), no more: six blocks of growth were fresh pages that
    no timed call used (48,000-55,000 faults a side for a 31 MiB softmax)."""
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", WRITTEN_FREE_PROBE], capture_output=True, text=True, cwd=ROOT,
                          timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    faults = int(proc.stdout)
    # two 24 MiB blocks of 6,144 pages grown, a third where the free bytes counted ran past the free chunks; not six
    assert 2 * 6144 <= faults <= 3 * 6144 + 200, faults


DRIVER_PROBE = """
import sys
import torch
from evaluator.worker.heap import minor_faults
from opforge.cli.program import main
sys.argv = ["opforge", *sys.argv[1:]]
main()  # a usage error (no such files): what the command's process keeps is set before its command runs
faults = []
for _ in range(16):  # as PROBE above: a received 48 MiB output, again and again
    before = minor_faults()
    out = torch.empty(48 << 18)
    out.fill_(1.0)
    faults.append(minor_faults() - before)
    del out
print(faults[-1])
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
@pytest.mark.parametrize("command, kept", [(["eval", "no-task.py", "no-candidate.py"], True),
                                           (["optimize", "no-task.py"], True),
                                           (["report", "--db", "sqlite:///no/such/dir/x.db"], False)])
def test_the_commands_that_drive_evaluations_keep_their_heap(tmp_path, command, kept):
    """The driver receives every trial's outputs into buffers of their size: in a command that drives evaluations
    they reuse freed memory (`heap.py`); other commands keep glibc's defaults."""
    proc = subprocess.run([sys.executable, "-c", DRIVER_PROBE, *command], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    faults = int(proc.stdout.split()[-1])
    assert (faults < 100) if kept else (faults >= (48 << 20) // 4096 // 2), (command, faults, proc.stderr[-300:])


RECEIVING_PROBE = """
import os, socket
import torch
from evaluator.worker.heap import keep_freed_memory, malloc_bytes
from evaluator.wire.frames import Channel
keep_freed_memory()
a, b = socket.socketpair()
if os.fork() == 0:  # the worker's side: the same 24 MiB output, six times
    out = torch.ones(6 << 20)
    for _ in range(6):
        Channel(a, "n").send({"status": "ran"}, [out])
    os._exit(0)
channel, addresses, held = Channel(b, "n", buffer=malloc_bytes), [], []  # as the driver's (connection.py)
for _ in range(6):
    _, (got,) = channel.recv(timeout_s=60)
    addresses.append(got.data_ptr())
    held.append(torch.empty(300, dtype=torch.uint8))  # the driver's small allocations between two receives
    del got
os.wait()
print(len(set(addresses[1:])))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt, fork")
def test_a_received_output_lands_in_the_memory_the_previous_one_freed():
    """A driver that keeps its heap receives each output into the block the previous one freed, though it allocated
    something small in between (`heap.malloc_bytes`): PyTorch's aligned allocation did not reuse such a block (every
    received 31 MiB output grew the heap by 7,936 fresh pages until several outputs' worth of freed memory had piled
    up)."""
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", RECEIVING_PROBE], capture_output=True, text=True, cwd=ROOT,
                          timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert int(proc.stdout) == 1, proc.stdout  # one block, reused by the second receive and every one after
