"""The CPU time a candidate's worker used while the reference was timed, and its OS threads, read by the driver from
the kernel's accounting (/proc/<pid>/stat, /proc/<pid>/task), never from the worker.

A worker that waits for its next command uses no CPU. The worker's own check of that (`call_checks.idle`) reads
`time.process_time` inside the candidate's process, where native code can replace the C function behind it: a
signal handler that spun one core while the other side's blocks ran, its CPU left out of that clock, slowed the
reference (the evaluation's own processes count as its own, not as the machine's other work) and passed
(`tests/cheats/native_busy_while_reference_runs.py`). The kernel's figure for the process cannot be rewritten from
inside it.

The worker counts its own threads too (`Guards.extra_threads`, /proc/self/task), with `os.listdir` inside the
candidate's process: native code replaced that C function with one that dropped the entries beyond the count at its
import, and a kernel that raised OpenMP's thread count passed (`tests/cheats/native_threads_hidden_from_count.py`).
`WorkerThreads` counts them from the driver, over the worker's whole tree (a child process's threads count, as its
CPU does): once when the worker first answers its load (the first build request, or its reply where it asks none:
before any of the candidate's native code was loaded, after the worker's own snapshot had started OpenMP's pool; the
lower of that and the count of the snapshot, which the answer reports: threads that Python code started during the
import are beyond it, `tests/cheats/native_threads_started_at_import.py`), then while the reference's blocks run and
after each of the candidate's timed calls, when the worker waits or runs the harness's code. Threads are judged by
what they do: beyond the first count, as many as the reference's own pool may stay (`process_tree.spare_threads`: a
pool parked between calls, a library's helper thread; more are refused), and none but the worker's main thread may
run while the worker waits for its next command, by the scheduler's account of each thread
(`tests/cheats/native_pool_thread_busy_between_calls.py`).

Inside bubblewrap the worker's pid is its PID namespace's; the driver finds the process among the zygote's
descendants by the last field of their `NSpid` line (the pid in the innermost namespace), which is the pid itself
without a namespace.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from evaluator.driver.connection import Refused
from evaluator.measure.other_work import _children, _process_cpu_s
from evaluator.result import Status
from evaluator.wire.replies import BuildRequest, Ready, Reply


def _inner_pid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"NSpid:"):
                    return int(line.split()[-1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def host_pid(root: int, inner_pid: int) -> int | None:
    """The pid, as the driver sees it, of the descendant of `root` (a zygote's process) whose own PID namespace
    calls it `inner_pid`; None where none does (or /proc cannot be read)."""
    frontier, seen = [root], set()
    while frontier:
        pid = frontier.pop()
        if pid in seen:
            continue
        seen.add(pid)
        if pid != root and _inner_pid(pid) == inner_pid:
            return pid
        frontier += _children(pid)
    return None


class WorkerCpu:
    """The worker's process tree from the driver: `cpu_s()`, its CPU seconds so far, `threads()`, its OS threads now,
    each over the worker and every live descendant (None where the worker cannot be read). A child's CPU is not its
    parent's until it is reaped: a child of the worker that spun while the reference was timed, hidden from the
    worker's own checks by a replaced os.listdir, passed while the driver read the worker's process alone
    (`tests/cheats/native_child_busy_hidden.py`)."""

    def __init__(self, root: int | None, inner_pid: int) -> None:
        self.pid = host_pid(root, inner_pid) if root is not None else None

    def _tree(self) -> list[int]:
        assert self.pid is not None
        found, frontier = [], [self.pid]
        while frontier:
            pid = frontier.pop()
            if pid not in found:
                found.append(pid)
                frontier += _children(pid)
        return found

    def cpu_s(self) -> float | None:
        """Live processes' own CPU, and the worker's children's that it reaped (fields 16 and 17 of proc(5))."""
        if self.pid is None:
            return None
        return sum(_process_cpu_s(p) for p in self._tree()) + _process_cpu_s(self.pid, reaped=True)

    def cpu_ns(self) -> int | None:
        """The tree's CPU in nanoseconds: each live thread's run time from the scheduler (`thread_cpu_ns`), plus what
        the worker's reaped children used (in ticks). A thread that ran and ended between two reads is in neither sum
        until its ticks reach the process's own figure: `cpu_s` still sees those, at 10 ms."""
        threads = self.thread_cpu_ns()
        if threads is None or self.pid is None:
            return None
        return sum(threads.values()) + int(_process_cpu_s(self.pid, reaped=True) * 1e9)

    def thread_cpu_ns(self) -> dict[int, int] | None:
        """Each live thread of the tree, by its id as the driver sees it, with its run time so far in nanoseconds
        (/proc/<pid>/task/<tid>/schedstat, exact to the nanosecond where proc(5)'s ticks are 10 ms); None where the
        worker cannot be read (gone, or not found)."""
        sched = self.thread_sched_ns()
        return None if sched is None else {tid: run for tid, (run, _) in sched.items()}

    def thread_sched_ns(self) -> dict[int, tuple[int, int]] | None:
        """Each live thread of the tree with the scheduler's two accounts of it so far, in nanoseconds: its time on a
        CPU, and its time runnable but waiting for one (the first two fields of schedstat); None where the worker
        cannot be read."""
        if self.pid is None:
            return None
        found: dict[int, tuple[int, int]] = {}
        for pid in self._tree():
            try:
                tids = os.listdir(f"/proc/{pid}/task")
            except OSError:
                if pid == self.pid:
                    return None
                continue
            for tid in tids:
                try:
                    with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as f:
                        run, wait = f.read().split()[:2]
                    found[int(tid)] = (int(run), int(wait))
                except (OSError, ValueError):
                    continue  # a thread that ended between the listing and its read
        return found

    def threads(self) -> int | None:
        """The OS threads of the worker's tree now (/proc/<pid>/task of each process), or None where the worker's
        cannot be read (gone, or not found)."""
        if self.pid is None:
            return None
        total = 0
        for pid in self._tree():
            try:
                total += len(os.listdir(f"/proc/{pid}/task"))
            except OSError:
                if pid == self.pid:
                    return None
        return total


# A parked thread (waiting on a futex or condition variable) runs for microseconds a wake-up; the sum over the worker's
# threads but its main one, while it waited for its next command, may not exceed the larger of these.
WAITING_CPU_FLOOR_NS = 10_000_000
WAITING_CPU_SHARE = 0.05  # of the time it waited


class WorkerThreads:
    """The candidate's worker's OS threads, judged by the driver: `count_first()` when the worker first answers its
    load, `refuse_more()` at each later read (CPU only: a GPU's runtime starts threads of its own lazily). A thread
    is judged by what it does, not by being there: up to `spare` threads beyond the first count may stay (a pool
    parked between calls, a helper thread a library keeps), and no thread but the worker's main one may run while
    the worker waits for its next command, by the scheduler's account of each thread's CPU. A read follows a wait
    where no message passed between the driver and the worker since the previous read, but reads of its clock
    (`messages`: how many so far, `WorkerConnection.messages`): the reference's blocks, which `measure` reads
    around. (After its last call of a block the worker still checks its outputs, on PyTorch's pool too, until it
    says it is done: not a wait.)"""

    def __init__(self, process: WorkerCpu, spare: int = 0, messages: Callable[[], int] | None = None,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.process, self.spare, self.messages, self.clock = process, spare, messages, clock
        self.first: int | None = None
        self._last: tuple[int, float, dict[int, int]] | None = None  # messages, time, each thread's CPU
        self.waited_s = 0.0  # the time between reads that followed a wait
        self.waited_ns: dict[int, int] = {}  # per thread but the main one, its CPU then

    def count_first(self, reply: Reply | None = None) -> None:
        """The first count, at the worker's first answer to its load (`reply`): the lower of the driver's count then
        and the one the worker's answer reports from its snapshot, taken before the candidate's import (threads that
        Python code started during the import, through `torch.jit.fork` or the `threading` that `torch.cuda`
        imports, are beyond the first count, as the worker's own check finds them)."""
        if self.first is not None:
            return
        threads = self.process.thread_cpu_ns()
        self.first = len(threads) if threads is not None else None
        reported = reply.threads if isinstance(reply, (Ready, BuildRequest)) else None
        if self.first is not None and reported is not None and 0 < reported < self.first:
            self.first = reported

    def refuse_more(self) -> None:
        now = self.process.thread_cpu_ns() if self.first is not None else None
        if now is None or self.first is None:
            return
        if len(now) - self.first > self.spare:
            raise Refused(Status.REJECTED, f"the candidate's process and its children have {len(now) - self.first} "
                                           "more OS thread(s) than before its code was loaded, by the driver's count, "
                                           f"where {self.spare} may stay parked (a thread or process left running, or "
                                           "a native kernel that raised its own OpenMP thread count: both sides get "
                                           "the same threads)")
        messages = self.messages() if self.messages is not None else None
        at, last = self.clock(), self._last
        if messages is None:
            return
        self._last = (messages, at, now)
        if last is None or last[0] != messages:  # the worker was asked or answered something: no wait
            return
        self.waited_s += at - last[1]
        for tid, ns in now.items():
            if tid != self.process.pid:
                self.waited_ns[tid] = self.waited_ns.get(tid, 0) + max(0, ns - last[2].get(tid, 0))
        busy_ns = sum(self.waited_ns.values())
        if busy_ns > max(WAITING_CPU_FLOOR_NS, WAITING_CPU_SHARE * self.waited_s * 1e9):
            tid = max(self.waited_ns, key=lambda t: self.waited_ns[t])
            raise Refused(Status.REJECTED, f"threads of the candidate's process ran {busy_ns / 1e6:.1f} ms of CPU in "
                                           f"the {self.waited_s:.2f} s it waited for its next command (thread {tid}: "
                                           f"{self.waited_ns[tid] / 1e6:.1f} ms), by the scheduler's account of each "
                                           "thread read by the driver: a thread may stay parked between calls, not "
                                           "compute there")
