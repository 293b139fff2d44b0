"""Suite-wide checks that name the test which broke the test process's shared state."""

from __future__ import annotations

import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator

import pytest


@pytest.fixture(autouse=True)
def subnormals_survive():
    """A shared library linked with the fast-math start file sets the FPU's flush-to-zero bits for the whole process
    that loads it; every later test would then compute differently (hypothesis refuses to draw floats at all). Fail
    the test that did it, by name, instead of a distant one."""
    yield
    tiny = float(sys.float_info.min)  # the smallest normal double: halving it gives a subnormal unless FTZ is on
    assert tiny / 2 != 0.0, "this test left the process flushing subnormal floats to zero (a fast-math library load?)"


@pytest.fixture
def fork_child() -> Iterator[Callable[[Callable[[], None]], int]]:
    """Children forked from this test's process (as a worker beside its zygote), each first running the change the
    test asks for, then sleeping until the test ends: the driver's reads of a real process (timer path, code pages)."""
    children: list[int] = []

    def start(change: Callable[[], None]) -> int:
        time.perf_counter_ns()  # the clock's slot bound before the fork, as the zygote binds it
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: change what the test asks, say so, then wait to be read
            try:
                change()
                os.write(w, b"1")
                time.sleep(60)
            finally:
                os._exit(0)
        os.close(w)
        assert os.read(r, 1) == b"1"
        os.close(r)
        children.append(pid)
        return pid

    yield start
    for pid in children:
        os.kill(pid, 9)
        os.waitpid(pid, 0)

# Files that measure the machine itself (real clocks, CPU time, page faults, the other work beside them) or hold
# deadlines that other work on the cores could break: `.ci/run` runs them on their own, after the rest has run side
# by side (`pytest -n`, one file per worker process). Everything else must stand another file's work beside it: no
# fixed ports, fresh PostgreSQL schemas (store_fixtures.py), its own temporary folders.
SERIAL_FILES = {
    "test_evaluator_timing.py": "asserts a measured speedup",
    "test_cpu_peaks.py": "measures the CPU's copy bandwidth and FMA peak",
    "test_measure_contention.py": "measures the other work on the machine while it spins",
    "test_measure_settle.py": "times against the real clock",
    "test_worker_cpu.py": "counts CPU time spent by spinning workers",
    "test_device_lock.py": "orders events by the clock",
    "test_heap.py": "counts page faults",
    "test_line_flush.py": "checks what the flush evicts from the caches",
    "test_clock_confirmation_retry.py": "compares the driver's clock with a worker's",
    "test_equal_costs.py": "compares the per-call costs of the two workers",
    "test_web_browser.py": "waits on a headless browser with deadlines",
    # Its clock and timer cheats are caught by comparing clocks, which other work beside them skews: under a load of
    # 7 on 2 cores, native_clock_slow_in_calls was once judged ok (2026-11-28). The cases whose verdict rests on no
    # clock (`beside: true` in their header: builds, sandboxes, static checks, crashes) are in test_cheats_beside.py.
    "test_cheats.py": "its clock and timer cheats are caught by comparing clocks",
}


# What the slowest files of the side-by-side phase take on the 2-core CI host (seconds: the run of 2026-11-28 with its
# 45.7 min, five files scaled by what the commits after it saved on the 2-core VM). `.ci/run` hands files to its
# workers longest first (`--no-loadscope-reorder` keeps this order), so that a long file never starts last while the
# other worker has nothing left to do. xdist's own order, by number of tests, put the one-test files of a minute or
# more (test_llm_unreachable, test_search_resume) and the four-test test_gpu_proof.py near the end. Rough figures
# do: only the order matters, and a file not listed counts a second a test. Update them from the `--durations` list
# that `.ci/run` prints when a file grows.
FILE_SECONDS = {
    "test_builtin_suites.py": 500,
    "test_cheats_beside.py": 330,  # 75 s with its builds cached; two CPU extensions and two CUDA checks built cold
    "test_export.py": 400,
    "test_cuda_build_cache.py": 250,
    "test_gpu_proof.py": 90,  # its CPU dry run interprets the cases at their own sizes since 2026-11-29
    "test_bench.py": 125,
    "test_llm_translation.py": 120,
    "test_dataset.py": 105,
    "test_ray_cluster.py": 95,
    "test_llm_unreachable.py": 20,
    "test_model.py": 60,
    "test_export_native.py": 55,
    "test_jobs.py": 55,
    "test_llm_loop.py": 50,
    "test_search_resume.py": 46,
    "test_pool.py": 45,
    "test_cpu_extension_build.py": 40,
    "test_evaluator_cli.py": 40,
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.name in SERIAL_FILES:
            item.add_marker(pytest.mark.serial)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # Only in xdist's workers, whose collection order the scheduler follows; a one-process run keeps the usual
        # order. A stable sort: each file's tests stay together and in their order.
        count = Counter(item.path.name for item in items)
        items.sort(key=lambda item: -FILE_SECONDS.get(item.path.name, count[item.path.name]))
