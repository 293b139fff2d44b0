"""evaluator/worker/memory_conditions.py: both workers of a CPU evaluation run with 4 KiB pages and a kept heap, whatever
the host's transparent huge page setting, and the verdict says so. The candidate's side is checked by the honest
case tests/honest/relu_small_pages.py (test_cheats.py); the reference's here, through a task that reads its own
process's status. The process-wide settings are made in child processes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from evaluator.worker import memory_conditions
from evaluator.worker.memory_conditions import MemoryConditions, host_thp_setting

ROOT = Path(__file__).resolve().parents[1]
TASKS = ROOT / "tests" / "tasks"
linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl and /proc are Linux's")

PROBE = """
import ctypes, mmap, os, sys
from evaluator.worker import memory_conditions
if sys.argv[1] == "apply":
    memory_conditions.apply()
libc = ctypes.CDLL(None)
libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
if os.fork() == 0:  # a worker forked after the setting
    region = mmap.mmap(-1, 8 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    address = ctypes.addressof(ctypes.c_char.from_buffer(region))
    start = -(-address // (2 << 20)) * (2 << 20)
    libc.madvise(start, 4 << 20, 14)  # MADV_HUGEPAGE: what numpy advises for its large arrays
    ctypes.memset(start, 1, 4 << 20)
    huge = 0
    for line in open("/proc/self/smaps"):
        if line.startswith("AnonHugePages:"):
            huge += int(line.split()[1])
    print(memory_conditions.small_pages_set(), huge, flush=True)
    os._exit(0)
os.wait()
"""


def probe(mode: str) -> tuple[bool, int]:
    proc = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    small, huge = proc.stdout.split()
    return small == "True", int(huge)


@linux
def test_a_process_forked_after_the_setting_gets_4_kib_pages_where_huge_pages_were_advised():
    small, huge_kib = probe("apply")
    assert small and huge_kib == 0
    plain_small, plain_huge_kib = probe("plain")
    assert not plain_small
    if host_thp_setting() in ("always", "madvise"):  # a host that gives advised ranges huge pages when it can
        assert plain_huge_kib > 0, "the host gave no huge page to an advised, written 4 MiB: the probe shows nothing"


def test_the_host_setting_is_read_from_its_brackets(tmp_path):
    (tmp_path / "enabled").write_text("always [madvise] never\n")
    assert host_thp_setting(tmp_path) == "madvise"
    assert host_thp_setting(tmp_path / "missing") == "unknown"
    assert memory_conditions.expected(tmp_path).host_thp == "madvise"


def test_the_conditions_in_words_name_the_page_size_and_the_heap():
    assert MemoryConditions(True, True, "always").text.startswith("4 KiB pages (transparent huge pages off); C heap kept")
    assert "transparent huge pages: always" in MemoryConditions(False, False, "always").text


@linux
def test_the_reference_worker_runs_with_4_kib_pages_and_the_verdict_states_it():
    """The task adds 1 where its process may use huge pages, so a plain ReLU is correct only if the reference's
    worker has them off."""
    from evaluator import EvalConfig, LocalEvaluator, load_candidate, load_task
    ev = LocalEvaluator()
    try:
        result = ev.evaluate(load_task(TASKS / "relu_small_pages.py"), load_candidate(ROOT / "benchmarks" / "tiny"
                                                                                    / "relu.seed.py"),
                             EvalConfig(device="cpu", max_timing_s=0.2, profile=False))
    finally:
        ev.close()
    assert result.status.value == "ok", result.reason
    assert result.device.memory is not None and result.device.memory.startswith("4 KiB pages")
