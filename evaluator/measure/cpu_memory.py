"""Peak memory of a CPU call, read by the driver from the kernel's accounting of the worker process.

The figure is what a steady call takes beyond what its process held before it: the driver resets the worker's peak
resident set (`/proc/<pid>/clear_refs`, "5": the kernel's high-water mark set to the current RSS), reads the mark,
tells the worker to make the call, and reads the mark again once the call is answered; the growth is the call's. The
GPU's figure is PyTorch's allocator statistics read in the worker (`gpu_memory.steady_peak`); on a CPU native code in
the candidate's process could rewrite any such count, while the kernel's mark of the process cannot be lowered from
inside it by anything but the same reset, which the sandbox's Landlock rules deny the candidate (no file under /proc
is writable there).

The rule is the GPU's: a warm-up call first, not measured, then the largest growth of `CALLS` calls. The worker gives
its C heap's free pages back before each (`memory_calls.py`), so a buffer a call allocates again is fresh pages that
count. The kernel's RSS counters are per-CPU and approximate to a few hundred KiB, so the figure is accurate to about
that (one test: an extra 32 MiB buffer per call reads within 10% of it).

Runs as a phase of its own after timing (the worker's heap, which timing keeps warm, is trimmed here), in both workers;
None where the worker cannot be found, with the reason once.

A driver that is not root cannot reset the mark (a worker is undumpable: its /proc files are root's, and only
`statm` and `status` stay readable to others). It then samples the worker's resident set (`statm`, a read of a few
microseconds) from the `go` until the reply is waiting, and takes the largest growth over the resident set before
the call. Still the kernel's figure read from outside the candidate's process, but a sample: a buffer held for less
time than one read can be missed, so the figure is a floor, and the verdict says it was sampled.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from evaluator.wire.commands import Go, MemoryCalls
from evaluator.driver.connection import WorkerConnection
from evaluator.measure.blocks import fresh_seed
from evaluator.wire.replies import Armed, Called, Measured

CALLS = 3
RESET_PEAK = b"5"


SAMPLED = ("sampled by the driver while each call ran (a driver that is not root cannot reset a worker's "
           "high-water mark): a floor, a buffer held for less than a read can be missed")


@dataclass(frozen=True, slots=True)
class CallPeaks:
    candidate_bytes: int | None
    reference_bytes: int | None
    problem: str | None = None  # why a side is None
    sampled: bool = False       # read by sampling the resident set, not from the reset high-water mark (`SAMPLED`)


class ProcessPeak:
    """A process's resident set and its high-water mark, from the driver (`proc`: the procfs root, for tests)."""

    def __init__(self, pid: int, proc: Path = Path("/proc")) -> None:
        self.pid, self._dir = pid, proc / str(pid)
        self.clear_refs = self._dir / "clear_refs"

    def reset(self) -> int:
        """Reset the mark to the current resident set; the mark after (bytes). OSError where it cannot."""
        with open(self.clear_refs, "wb", buffering=0) as f:
            f.write(RESET_PEAK)
        return self.high_water_bytes()

    def high_water_bytes(self) -> int:
        return self._status_kib("VmHWM") * 1024

    def resident_bytes(self) -> int:
        return self._status_kib("VmRSS") * 1024

    def sampler(self) -> "ResidentSampler":
        return ResidentSampler(self._dir / "statm")

    def _status_kib(self, field: str) -> int:
        with open(self._dir / "status", "rb") as f:
            for line in f:
                if line.startswith(field.encode() + b":"):
                    return int(line.split()[1])
        raise OSError(f"no {field} in {self._dir / 'status'}")


class ResidentSampler:
    """A process's resident set read again and again from its `statm` through one descriptor (no open per read)."""

    def __init__(self, statm: Path) -> None:
        self._fd = os.open(statm, os.O_RDONLY | os.O_CLOEXEC)
        self._page_bytes = os.sysconf("SC_PAGE_SIZE")

    def resident_bytes(self) -> int:
        return int(os.pread(self._fd, 256, 0).split()[1]) * self._page_bytes

    def largest_until(self, answered: Callable[[], bool]) -> int:
        """The largest resident set read until `answered()` (read at least once after it says so)."""
        top = self.resident_bytes()
        while not answered():
            top = max(top, self.resident_bytes())
        return max(top, self.resident_bytes())

    def close(self) -> None:
        os.close(self._fd)


def peak_of_calls(conn: WorkerConnection, peak: ProcessPeak, timeout_s: float, calls: int = CALLS,
                  sampled: bool = False) -> int | None:
    """The largest growth of the worker's peak resident set over `calls` steady calls (bytes); None where the mark
    could not be read around every call (the process gone: its connection then fails too). `sampled`: the resident
    set is sampled while each call runs instead (`ResidentSampler`), the mark being out of the driver's reach."""
    conn.send(MemoryCalls(variant=0, seed=fresh_seed(), calls=calls))
    growths: list[int] = []
    try:
        sampler = peak.sampler() if sampled else None
    except OSError:
        sampler = None  # the process is gone: its connection fails below
    try:
        for _ in range(calls):
            conn.recv_as(Armed, timeout_s, "preparing a memory-measured call")
            try:
                before: int | None = sampler.resident_bytes() if sampler is not None else (
                    None if sampled else peak.reset())
            except OSError:
                before = None
            conn.send(Go())
            try:
                if sampler is not None and before is not None:
                    growths.append(max(sampler.largest_until(lambda: conn.answered(0.0)) - before, 0))
            except OSError:
                pass
            conn.recv_as(Called, timeout_s, "a memory-measured call")
            try:
                if sampler is None and before is not None:
                    growths.append(max(peak.high_water_bytes() - before, 0))
            except OSError:
                pass
    finally:
        if sampler is not None:
            sampler.close()
    conn.recv_as(Measured, timeout_s, "the checks after the memory-measured calls")
    return max(growths) if len(growths) == calls else None


def peaks_of_both(reference: WorkerConnection, candidate: WorkerConnection, reference_pid: int | None,
                  candidate_pid: int | None, timeout_s: float, proc: Path = Path("/proc")) -> CallPeaks:
    """Both sides' steady peaks, the candidate's first; a side whose process cannot be read or reset is None, with
    why (the worker is then asked nothing)."""
    figures: list[int | None] = []
    problem = None
    sampled = False
    for conn, pid in ((candidate, candidate_pid), (reference, reference_pid)):
        if pid is None:
            problem = problem or f"the {conn.role}'s worker process was not found"
            figures.append(None)
            continue
        peak = ProcessPeak(pid, proc)
        try:
            peak.reset()
            side_sampled = False
        except OSError:
            side_sampled = sampled = True  # not root: sample the resident set instead (both sides alike below)
        figures.append(peak_of_calls(conn, peak, timeout_s, sampled=side_sampled or sampled))
    return CallPeaks(figures[0], figures[1], problem, sampled)
