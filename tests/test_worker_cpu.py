"""The candidate's CPU while the reference is timed, read by the driver from the kernel's accounting
(`evaluator/worker_cpu.py`, `clock_checks.IdleCandidate`): a worker's own idle check runs in a process whose native code
can rewrite the clock it reads."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from evaluator import measure
from evaluator.connection import Refused
from evaluator.clock_checks import IdleCandidate
from evaluator.measure import SideRecord
from evaluator.worker_cpu import WorkerCpu, WorkerThreads, host_pid


def test_a_descendant_is_found_by_its_own_pid_and_its_cpu_read_from_the_kernel():
    spin = "import time\nt = time.time()\nwhile time.time() - t < 0.6: pass\n"
    child = subprocess.Popen([sys.executable, "-c", spin])
    try:
        assert host_pid(os.getpid(), child.pid) == child.pid  # no PID namespace: NSpid is the pid itself
        assert host_pid(os.getpid(), 1 << 30) is None
        cpu = WorkerCpu(os.getpid(), child.pid)
        first = cpu.cpu_s()
        time.sleep(0.4)
        second = cpu.cpu_s()
        assert first is not None and second is not None and second - first >= 0.1
    finally:
        child.wait()
    assert WorkerCpu(None, 123).cpu_s() is None


def test_cpu_spent_while_the_reference_runs_is_refused_and_none_is_not():
    readings = iter([1.0, 1.0, 1.0, 1.6])  # quiet during the first block, 0.6 s of CPU during the second
    idle = IdleCandidate(lambda: next(readings))
    idle.around(lambda: time.sleep(0.01))
    idle.refuse_busy()  # nothing spent yet
    idle.around(lambda: time.sleep(0.01))
    with pytest.raises(Refused, match="kernel's accounting"):
        idle.refuse_busy()
    unreadable = IdleCandidate(lambda: None)
    unreadable.around(lambda: None)
    unreadable.refuse_busy()  # nothing known, nothing said


def test_only_the_reference_blocks_are_watched(monkeypatch: pytest.MonkeyPatch):
    watched: list[str] = []

    def block(conn, rec, cfg, keeps, first, after_call=None):  # noqa: ANN001, ANN202
        watched.append(f"{conn} block")
        if after_call is not None:
            after_call()  # the candidate's calls
        rec.blocks += 1

    class Idle(IdleCandidate):
        def around(self, run):  # noqa: ANN001, ANN202
            watched.append("ref")
            run()

    monkeypatch.setattr(measure, "_block", block)
    ref, cand = SideRecord(), SideRecord()
    from evaluator.config import EvalConfig
    measure._round([("c", cand, 1), ("r", ref, 0)], ref, cand, EvalConfig(), None,  # type: ignore[list-item]
                   Idle(lambda: 0.0), threads=lambda: watched.append("threads"))
    # The driver counts the candidate's threads after its calls, and before and after the reference's block.
    assert watched == ["c block", "threads", "threads", "ref", "r block", "threads"]
    assert ref.blocks == 1 and cand.blocks == 1


def test_threads_are_counted_from_outside_and_more_than_the_first_count_refused():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.5)"])
    try:
        assert WorkerCpu(os.getpid(), child.pid).threads() == 1  # read from /proc/<pid>/task by this process
    finally:
        child.wait()
    assert WorkerCpu(None, 123).threads() is None

    class Counts(WorkerCpu):
        def __init__(self, counts: list[int]) -> None:
            self.pid, self.counts = 1, iter(counts)

        def threads(self) -> int | None:
            return next(self.counts)

    watch = WorkerThreads(Counts([3, 3, 4]))
    watch.count_first()
    watch.count_first()  # the first count stays the first (no read)
    watch.refuse_more()  # as many as at first
    with pytest.raises(Refused, match="driver's count"):
        watch.refuse_more()
    unread = WorkerThreads(Counts([]))
    unread.refuse_more()  # never counted first: nothing to compare with, nothing read


def test_the_cpu_and_threads_of_the_whole_tree_are_read():
    """A child's CPU is not its parent's until it is reaped: the tree's is read, children included."""
    spawn = ("import subprocess, sys, time\n"
             "spin = 'import time\\nt = time.time()\\nwhile time.time() - t < 0.8: pass\\n'\n"
             "child = subprocess.Popen([sys.executable, '-c', spin])\n"
             "child.wait()\n")
    worker = subprocess.Popen([sys.executable, "-c", spawn])
    try:
        cpu = WorkerCpu(os.getpid(), worker.pid)
        time.sleep(0.3)  # the worker has started its child, which spins
        first, threads = cpu.cpu_s(), cpu.threads()
        time.sleep(0.3)
        second = cpu.cpu_s()
        assert threads is not None and threads >= 2  # the worker's thread and its child's
        assert first is not None and second is not None and second - first >= 0.1  # the child's CPU, read live
    finally:
        worker.wait()


def test_the_first_count_is_the_lower_of_the_drivers_and_the_snapshots():
    """Threads that the candidate's Python code started during its import, before the worker's first answer, are
    beyond the count of the worker's snapshot, taken before the import."""

    class Counts(WorkerCpu):
        def __init__(self, counts: list[int]) -> None:
            self.pid, self.counts = 1, iter(counts)

        def threads(self) -> int | None:
            return next(self.counts)

    started_at_import = WorkerThreads(Counts([5, 5]))
    started_at_import.count_first({"status": "build", "threads": 3})
    with pytest.raises(Refused, match="2 more OS thread"):
        started_at_import.refuse_more()
    for reported in (None, 0, 7, "3"):  # none, nonsense, or more than the driver counts: the driver's count holds
        watch = WorkerThreads(Counts([5, 5]))
        watch.count_first({"status": "ready", "threads": reported})
        watch.refuse_more()
