"""The candidate's CPU while the reference is timed, read by the driver from the kernel's accounting
(`evaluator/measure/worker_cpu.py`, `clock_checks.IdleCandidate`): a worker's own idle check runs in a process whose native code
can rewrite the clock it reads."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from evaluator.measure import blocks as measure
from evaluator.driver.connection import Refused
from evaluator.measure.clock_checks import IdleCandidate
from evaluator.measure.blocks import SideRecord
from evaluator.measure.worker_cpu import WorkerCpu, WorkerThreads, host_pid
from evaluator.wire.replies import BuildRequest, Ready


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


def test_a_thread_s_time_waiting_for_a_cpu_is_read_beside_its_time_on_one():
    """`thread_sched_ns`: two processes spinning on one CPU each wait for it about half the time; the driver reads
    both accounts of the worker's thread (`scripts/bench_slow_calls.py` tells slow calls apart by them)."""
    spin = "import os, time\nos.sched_setaffinity(0, {0})\nt = time.time()\nwhile time.time() - t < 1.0: pass\n"
    worker, rival = (subprocess.Popen([sys.executable, "-c", spin]) for _ in range(2))
    try:
        time.sleep(0.3)  # both started and pinned
        cpu = WorkerCpu(os.getpid(), worker.pid)
        first = cpu.thread_sched_ns()
        time.sleep(0.4)
        second = cpu.thread_sched_ns()
        assert first is not None and second is not None
        run_s = (second[worker.pid][0] - first[worker.pid][0]) / 1e9
        wait_s = (second[worker.pid][1] - first[worker.pid][1]) / 1e9
        assert run_s >= 0.05 and wait_s >= 0.05, (run_s, wait_s)
        assert cpu.thread_cpu_ns() is not None and set(cpu.thread_cpu_ns() or ()) == set(second)
    finally:
        worker.wait()
        rival.wait()
    assert WorkerCpu(None, 123).thread_sched_ns() is None


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

    def block(conn, rec, cfg, keeps, first, after_call=None, inputs=None):  # noqa: ANN001, ANN202
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


class Counts(WorkerCpu):
    """The driver's reads of a worker's threads, scripted: each a count of threads that never ran."""

    def __init__(self, counts: list[int]) -> None:
        self.pid, self.counts = 1, iter(counts)

    def thread_cpu_ns(self) -> dict[int, int] | None:
        return {tid: 0 for tid in range(1, next(self.counts) + 1)}


def test_threads_are_counted_from_outside_and_more_than_the_first_count_refused():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.5)"])
    try:
        assert WorkerCpu(os.getpid(), child.pid).threads() == 1  # read from /proc/<pid>/task by this process
    finally:
        child.wait()
    assert WorkerCpu(None, 123).threads() is None

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

    started_at_import = WorkerThreads(Counts([5, 5]), spare=1)
    started_at_import.count_first(BuildRequest(spec={}, threads=3))
    with pytest.raises(Refused, match="2 more OS thread.*where 1 may stay parked"):
        started_at_import.refuse_more()
    for reported in (None, 0, 7):  # none, nonsense, or more than the driver counts: the driver's count holds
        watch = WorkerThreads(Counts([5, 5]))  # (a count that is not an int is refused by the parse)
        watch.count_first(Ready(variants=1, threads=reported))
        watch.refuse_more()


class ThreadReads(WorkerCpu):
    """A worker (pid 100) whose threads' CPU the test scripts, as /proc/<pid>/task/<tid>/schedstat would give it."""

    def __init__(self) -> None:
        self.pid = 100
        self.now: dict[int, int] = {100: 0, 101: 0}  # the main thread and OpenMP's pool before the candidate

    def thread_cpu_ns(self) -> dict[int, int] | None:
        return dict(self.now)


def test_kept_threads_are_judged_by_their_cpu_while_the_worker_waits():
    """A thread beyond the first count may stay while it does nothing outside the calls: parked between them, it
    passes; one that computes while the worker waits for its next command (the reference's blocks) is refused, however
    long it was parked before. Windows in which a message passed are the calls', which the threads serve."""
    worker, messages, now_s = ThreadReads(), [0], [0.0]
    watch = WorkerThreads(worker, spare=1, messages=lambda: messages[0], clock=lambda: now_s[0])
    watch.count_first()
    ms = 1_000_000

    def read(messages_since: int, seconds: float, **grew_ms: float) -> None:
        messages[0] += messages_since
        now_s[0] += seconds
        for name, grew in grew_ms.items():
            tid = int(name[1:])
            worker.now[tid] = worker.now.get(tid, 0) + int(grew * ms)
        watch.refuse_more()

    read(3, 0.2, t100=40, t102=30)  # a call: the pool's thread (102) started and computed in it, the main one too
    read(1, 0.1, t100=5)  # the worker's end of its block, then the read before the reference's block
    read(0, 0.5, t100=50, t101=0.01, t102=0.02)  # the reference's block: parked (the main thread is not judged)
    read(4, 0.3, t100=40, t101=20, t102=60)  # calls again
    read(0, 0.5, t102=5)  # a wake-up in a wait: 5 ms, under the floor
    assert watch.waited_s == pytest.approx(1.0)
    with pytest.raises(Refused, match=r"ran 105\.0 ms of CPU in the 1\.50 s it waited for its next command "
                                      r"\(thread 102: 105\.0 ms\)"):
        read(0, 0.5, t102=100)  # computing between calls: 105 ms in 1.5 s of waiting, over 5% of it (75 ms)


def test_a_thread_born_while_the_worker_waits_counts_whole_and_more_threads_than_spare_are_refused():
    worker, messages = ThreadReads(), [0]
    watch = WorkerThreads(worker, spare=1, messages=lambda: messages[0], clock=iter([0.0, 0.1, 0.2]).__next__)
    watch.count_first()
    watch.refuse_more()
    worker.now[103] = 20 * 1_000_000  # started and ran 20 ms since the last read, with no message in between
    with pytest.raises(Refused, match="thread 103: 20.0 ms"):
        watch.refuse_more()
    worker.now.update({104: 0, 105: 0})
    with pytest.raises(Refused, match="3 more OS thread.*where 1 may stay parked"):
        watch.refuse_more()
    unjudged = WorkerThreads(ThreadReads(), spare=1)  # no message count: the threads are counted, not timed
    unjudged.count_first()
    unjudged.process.now[102] = 10**9  # type: ignore[attr-defined]
    unjudged.refuse_more()
    unjudged.refuse_more()


def test_the_connection_counts_every_message_but_reads_of_the_clock():
    from types import SimpleNamespace

    from evaluator.wire.commands import Clock, Go
    from evaluator.driver.connection import WorkerConnection

    replies = iter([{"status": "clock", "now_ms": 1.0}, {"status": "armed"}])
    conn = WorkerConnection.__new__(WorkerConnection)
    channel = SimpleNamespace(send=lambda header: None, recv=lambda timeout_s: (next(replies), []))
    conn.channel = channel  # type: ignore[assignment]
    conn.zygote, conn.role, conn.messages = SimpleNamespace(dynamo=False), "candidate", 0  # type: ignore[assignment]
    conn.send(Clock())
    conn.recv(1.0, "reading its clock")
    assert conn.messages == 0
    conn.send(Go())
    conn.recv(1.0, "a timed call")
    assert conn.messages == 2


def test_the_workers_own_count_is_a_first_line_that_allows_the_spare_threads():
    from evaluator.worker.call_checks import threads_problem
    from evaluator.worker.guards import Guards

    guards = Guards(watched_modules=())
    guards.thread_count, guards.baseline_threads = (lambda: 1), 1
    guards.baseline_os_threads, guards.spare_threads = 4, 1
    guards.os_thread_count = lambda: 5  # a parked pool of one
    assert threads_problem(guards) is None
    guards.os_thread_count = lambda: 6
    assert "2 more thread(s) after a call than before its first, where 1 may stay parked" in (
        threads_problem(guards) or "")
