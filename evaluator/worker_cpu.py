"""The CPU time a candidate's worker used while the reference was timed, read by the driver from the kernel's
accounting (/proc/<pid>/stat), never from the worker.

A worker that waits for its next command uses no CPU. The worker's own check of that (`call_checks.idle`) reads
`time.process_time` inside the candidate's process, where native code can replace the C function behind it: a
signal handler that spun one core while the other side's blocks ran, its CPU left out of that clock, slowed the
reference (the evaluation's own processes count as its own, not as the machine's other work) and passed
(`tests/cheats/native_busy_while_reference_runs.py`). The kernel's figure for the process cannot be rewritten from
inside it.

Inside bubblewrap the worker's pid is its PID namespace's; the driver finds the process among the zygote's
descendants by the last field of their `NSpid` line (the pid in the innermost namespace), which is the pid itself
without a namespace.
"""

from __future__ import annotations

from evaluator.other_work import _children, _process_cpu_s


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
    """`cpu_s()`: the worker's CPU seconds so far (every thread of its process), or None where it cannot be read."""

    def __init__(self, root: int | None, inner_pid: int) -> None:
        self.pid = host_pid(root, inner_pid) if root is not None else None

    def cpu_s(self) -> float | None:
        return None if self.pid is None else _process_cpu_s(self.pid)
