"""How much of the machine other work took while a timing round ran (CPU): the cores kept busy by processes that are
neither the driver nor one of its descendants (zygotes, workers), plus the time the hypervisor gave the VM's CPUs to
someone else (steal). Read by the driver from the kernel's own accounting (/proc/stat, /proc/<pid>/stat), never from
a worker: a candidate's own threads are its process's CPU time, so they count as the evaluation's, not as other work.

Why it matters (docs/EVALUATOR.md, "When other work shares the cores"): a kernel that hands out rows dynamically
and one that splits them statically (PyTorch's softmax) slow down by different factors when another process takes
one of two cores, so the speedup itself moves (1.15x with the cores free, 1.55x with one taken, in one process);
an evaluation in which such work came and went mixed both and read anywhere between.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Protocol

_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


def machine_busy_s(read: Callable[[], bytes] | None = None) -> float | None:
    """Seconds of CPU time the whole machine has been busy or stolen since boot (every CPU summed), or None where
    /proc/stat cannot be read. Idle and iowait are not busy; guest time is already inside user time."""
    try:
        line = read() if read is not None else _first_line("/proc/stat")
        ticks = [int(x) for x in line.split()[1:]]
    except (OSError, ValueError):
        return None
    if len(ticks) < 4:
        return None
    busy = sum(ticks[:8]) - ticks[3] - (ticks[4] if len(ticks) > 4 else 0)  # user..steal, less idle and iowait
    return busy * _TICK_S


def _first_line(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.readline()


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                kids += [int(k) for k in f.read().split()]
    except (OSError, ValueError):
        pass
    return kids


def _process_cpu_s(pid: int, reaped: bool = False) -> float:
    """utime + stime of every thread of `pid` (fields 14 and 15 of proc(5)), or with `reaped` the CPU of the children
    it waited for (cutime + cstime, 16 and 17); 0 where it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return 0.0
    rest = stat[stat.rfind(b")") + 2:].split()  # counted from the state, field 3
    first = 13 if reaped else 11
    return (int(rest[first]) + int(rest[first + 1])) * _TICK_S


def own_cpu_s(root: int | None = None) -> float:
    """CPU seconds of this driver process (all its threads) and every live descendant (bubblewrap, zygotes,
    workers), found through the kernel's per-thread children lists (a few small reads, no scan of /proc)."""
    root = os.getpid() if root is None else root
    total, frontier, seen = 0.0, [root], set()
    while frontier:
        pid = frontier.pop()
        if pid in seen:
            continue
        seen.add(pid)
        total += _process_cpu_s(pid)
        frontier += _children(pid)
    return total


class Meter(Protocol):
    """What the timing protocol asks of a meter of other work (`OtherWork`; tests script one)."""

    def start(self) -> None: ...

    def cores(self) -> float | None: ...


class OtherWork:
    """`start()` then `cores()`: the average number of cores other work kept busy in between (None where the
    kernel's accounting cannot be read). Resolution: a clock tick (10 ms) of each CPU, so a round of a few tenths of
    a second reads to a few hundredths of a core."""

    def __init__(self, busy: Callable[[], float | None] = machine_busy_s, own: Callable[[], float] = own_cpu_s,
                 clock: Callable[[], float] | None = None) -> None:
        self._busy, self._own, self._clock = busy, own, clock or time.perf_counter
        self._start: tuple[float, float, float] | None = None

    def start(self) -> None:
        busy = self._busy()
        self._start = None if busy is None else (busy, self._own(), self._clock())

    def cores(self) -> float | None:
        if self._start is None:
            return None
        busy = self._busy()
        if busy is None:
            return None
        busy0, own0, t0 = self._start
        elapsed_s = self._clock() - t0
        if elapsed_s <= 0:
            return None
        return max(0.0, (busy - busy0) - (self._own() - own0)) / elapsed_s
