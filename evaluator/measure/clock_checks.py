"""The driver's checks of what the workers' timers report against its own clock, and of what the candidate's worker
does while it should be idle (`measure/blocks.py` times both sides; these judge the figures it collected):

- `CandidateClock`: the candidate's timer clock read around each of the reference's blocks;
- `_cross_check`: the two sides' per-call walls by the driver's clock against their claimed times, block pair by
  block pair, and (`_cross_check_calls`, CPU) each call's remainder beyond its claim;
- `_refuse_work_left_running`: work the device kept doing after a call's end mark;
- `IdleCandidate`: the candidate's worker's CPU by the kernel's accounting while the reference's blocks ran.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from evaluator.device.rules import rules
from evaluator.measure.block_sizes import MIN_BLOCK_CALLS, MIN_BLOCKS
from evaluator.wire.commands import Clock
from evaluator.config import EvalConfig
from evaluator.driver.connection import Refused, WorkerConnection
from evaluator.result import Status, Timing
from evaluator.wire.replies import ClockRead

if TYPE_CHECKING:
    from evaluator.measure.blocks import SideRecord

@dataclass
class IdleCandidate:
    """The candidate's worker's CPU (its whole tree) while the reference's blocks ran, by the kernel's accounting
    (`worker_cpu.py`): it waits for its next command then, and CPU it spends slows the reference (a spinning signal
    handler whose CPU the worker's own idle check was told nothing of, a child process hidden from its checks)."""

    read_cpu_s: Callable[[], float | None]
    cpu_s: float = 0.0
    wall_s: float = 0.0

    def around(self, block: Callable[[], None]) -> None:
        cpu0, t0 = self.read_cpu_s(), time.perf_counter()
        block()
        cpu1, t1 = self.read_cpu_s(), time.perf_counter()
        if cpu0 is not None and cpu1 is not None:
            self.cpu_s += cpu1 - cpu0
            self.wall_s += t1 - t0

    def refuse_busy(self) -> None:
        if self.cpu_s > max(IDLE_WHILE_TIMED_FLOOR_S, IDLE_WHILE_TIMED_SHARE * self.wall_s):
            raise Refused(Status.REJECTED, f"the candidate's process used {self.cpu_s:.2f} s of CPU by the kernel's "
                                           f"accounting in the {self.wall_s:.2f} s the reference was timed, while it "
                                           "had nothing to do (work slowing the reference down)")


class QuietWindow:
    """The candidate's worker's CPU, by the kernel's accounting to the nanosecond (`WorkerCpu.cpu_ns`), while the
    driver reads a timed call's outputs from the shared file (`output_slot.py`): the worker sent the call's reply and
    waits for the driver's next word, so it has nothing to run. A thread or signal handler that finishes the outputs
    after the call returned (a call that computes part of its outputs and completes them while the driver reads, in
    the shared file itself, or work deferred past the reply) runs here, and the driver sees it. Judged on the median
    over the windows in which the driver read (the candidate cannot tell which those are): a stray wake-up in one is
    forgiven, work after every call is not."""

    def __init__(self, read_cpu_ns: Callable[[], int | None], what: str | None = None) -> None:
        """`what`: the refusal's account of the window, where it is not the reads' (`trusted_inputs.py`: the draw of
        the next call's inputs)."""
        self.read_cpu_ns = read_cpu_ns
        self.what = what
        self.read_ms: list[float] = []  # the worker's CPU in each window in which the driver read
        self.call_ms: list[float] = []  # the claimed time of those calls

    def around(self, read: Callable[[], None], call_ms: float, reading: bool = True) -> None:
        cpu0 = self.read_cpu_ns()
        read()
        cpu1 = self.read_cpu_ns()
        if reading and cpu0 is not None and cpu1 is not None:
            self.read_ms.append((cpu1 - cpu0) / 1e6)
            self.call_ms.append(call_ms)

    def refuse_busy(self) -> None:
        if not self.read_ms:
            return
        used_ms, call_ms = statistics.median(self.read_ms), statistics.median(self.call_ms)
        if used_ms <= QUIET_FLOOR_MS + QUIET_SHARE * call_ms:
            return
        if self.what is not None:
            raise Refused(Status.REJECTED, f"{self.what}: {used_ms:.3f} ms of CPU by the kernel's accounting, median "
                                           f"over the calls, beside a median call of {call_ms:.3f} ms")
        raise Refused(Status.REJECTED, f"the candidate's process kept working after its timed calls had returned, "
                                       f"while the driver read their outputs: {used_ms:.3f} ms of CPU by the "
                                       f"kernel's accounting after a median call of {call_ms:.3f} ms (its "
                                       "outputs were not finished when it said so)")


QUIET_FLOOR_MS = 0.15  # a worker that sent its reply and waits in recv: medians of 0-0.11 ms on a loaded machine
QUIET_SHARE = 0.05


IDLE_WHILE_TIMED_SHARE = 0.1  # a waiting worker uses none; the kernel's ticks are 10 ms
IDLE_WHILE_TIMED_FLOOR_S = 0.05  # as the worker's own check (`call_checks.IDLE_CPU_FLOOR_S`)



class CandidateClock:
    """The candidate's timer clock, read by the driver right before and right after each of the reference's blocks,
    while the candidate's worker waits (`IdleCandidate` sees that it does): a clock rewritten from C to count the
    calling thread's CPU time stands still there, and claims par or better for a kernel many times slower inside the
    calls, where the comparison of per-call walls has too much noise to say so. An honest clock advances at least as
    far as the driver's in every window, since its two reads fall outside the driver's marks.

    The windows are the reference's own blocks, which the candidate waits through anyway: until 2026-11-25 the
    driver read the clock twice 50 ms apart after timing, an idle wait of its own in every evaluation."""

    def __init__(self, conn: WorkerConnection, timeout_s: float) -> None:
        self.conn, self.timeout_s = conn, timeout_s
        self.worker_ms = 0.0
        self.driver_ms = 0.0

    def _read_ms(self) -> float:
        reply, _ = self.conn.request_as(Clock(), ClockRead, self.timeout_s, "reading its clock")
        return reply.now_ms

    def around(self, block: Callable[[], None]) -> None:
        first_ms = self._read_ms()
        t0 = _driver_now()
        block()
        self.driver_ms += (_driver_now() - t0) * 1e3
        self.worker_ms += self._read_ms() - first_ms

    def refuse_stopped(self) -> None:
        """Refuse a clock that advanced less than half as far as the driver's over the windows."""
        if self.worker_ms < 0.5 * self.driver_ms:
            raise Refused(Status.REJECTED, f"the worker's timer clock advanced {self.worker_ms:.1f} ms while "
                                           f"{self.driver_ms:.0f} ms passed by the driver's clock (its clock was "
                                           "rewritten)")


_driver_now = time.perf_counter


class ClockDisagreement(Refused):
    """The driver's clock did not support what the candidate's timer reported (`_cross_check`)."""


def _cross_check(ref: SideRecord, cand: SideRecord, device_kind: str) -> CallGap | None:
    """Refuse a candidate whose reported times are shorter than the driver's own clock allows; returns the per-call
    gap it judged (`call_gap`), None where it judged none (a claimed speedup of 1 or less, a device's own events).

    Both workers pay the same costs around each call (same code, same checks), so the difference of their per-call
    wall times seen by the driver estimates the difference of their true call times. Only a claimed speedup that
    the driver's clock cannot support (by more than 2x, beyond noise) is refused: a slow honest candidate whose
    interpreter leaves extra garbage behind is never at risk.
    """
    if len(ref.walls_ms) < 3 or len(cand.walls_ms) < 3:
        return None
    ref_ms, cand_ms = statistics.median(ref.samples_ms), statistics.median(cand.samples_ms)
    # Block i of one side ran right before or after block i of the other: their walls saw the same load, so the
    # gap is taken pair by pair (a burst of the machine's other work inside some blocks cancels out).
    pairs = list(zip(cand.block_walls_ms, ref.block_walls_ms))
    wall_gap = (statistics.median(c - r for c, r in pairs) if len(pairs) >= MIN_BLOCKS
                else statistics.median(cand.walls_ms) - statistics.median(ref.walls_ms))
    claimed_gap = cand_ms - ref_ms
    noise = _iqr(cand.walls_ms) + _iqr(ref.walls_ms)
    floor_ms = rules(device_kind).clock_gap_floor_ms
    implied_cand_ms = max(ref_ms + wall_gap, 1e-6)
    claimed_speedup, implied_speedup = ref_ms / max(cand_ms, 1e-9), ref_ms / implied_cand_ms
    # A candidate slower than the reference is not judged here: the watch around its calls (the profiler, the
    # checks on its outputs) costs the driver's clock a few ms a call at 31 MiB that the reference's does not.
    if claimed_speedup <= 1.0:
        return None
    gap = _cross_check_calls(ref, cand, cand_ms, device_kind)
    if claimed_speedup < 2 * implied_speedup:
        return gap
    if wall_gap - claimed_gap > 0.25 * max(ref_ms, cand_ms) + noise + floor_ms:
        raise ClockDisagreement(Status.REJECTED,
                                f"the candidate's reported times disagree with the driver's clock: its calls took "
                                f"{wall_gap:.3f} ms longer than the reference's by the driver's clock but "
                                f"{claimed_gap:.3f} ms by its own timer (timer tampering)")
    return gap


CALL_GAP_SHARE = 0.1  # of the claimed call time: what the harness's costs around a call may differ by, beyond noise
# The same where both sides' outputs were named in memory, not copied inside the window (`output_slot.py`): the
# copy's cache-dependent cost was most of the honest difference. Measured 2026-11-29 (scripts/bench_remainders.py,
# 2-core VM, load 3): the native seeds' remainders then needed a share below -7% to be refused (up to +3.5% with the
# copy), a clock lagging 12% of each call one above +10%.
CALL_GAP_SHARE_NAMED = 0.05
CALL_GAP_FLOOR_MS = 0.15  # the same in ms: the roles' watches record different operators (seen: -0.15 to +0.16)


@dataclass(frozen=True)
class CallGap:
    """How much more the driver's clock saw around each of the candidate's calls, beyond its timer's figure, than
    around the reference's (`short_ms`, medians of the per-call remainders), and what that may be before the
    candidate's claim is refused (`allowed_ms`: a share of the claimed call, a floor, and the medians' noise)."""
    short_ms: float
    noise_ms: float
    allowed_ms: float
    cand_ms: float
    share: float = CALL_GAP_SHARE  # of the claimed call, in `allowed_ms`

    @property
    def refused(self) -> bool:
        return self.short_ms > self.allowed_ms


def call_gap(ref: SideRecord, cand: SideRecord, cand_ms: float) -> CallGap | None:
    """The per-call remainders' gap (`_cross_check_calls`); None with too few calls on either side."""
    cand_rest = [w - t for w, t in zip(cand.call_walls_ms, cand.samples_ms)]
    ref_rest = [w - t for w, t in zip(ref.call_walls_ms, ref.samples_ms)]
    if len(cand_rest) < MIN_BLOCK_CALLS or len(ref_rest) < MIN_BLOCK_CALLS:
        return None
    short_ms = statistics.median(cand_rest) - statistics.median(ref_rest)
    # The noise of the two medians, from the reference's spread alone: the same harness work spreads alike in both
    # roles (honest candidates' spreads were 0.5-2 times the reference's), while a forged timer's own spread grows
    # with what it takes off each call (3-8 ms where the reference's was 1-4), which would widen its own tolerance.
    noise_ms = 3 * _iqr(ref_rest) * math.sqrt(1 / len(cand_rest) + 1 / len(ref_rest))
    share = CALL_GAP_SHARE_NAMED if ref.outputs_named and cand.outputs_named else CALL_GAP_SHARE
    return CallGap(short_ms, noise_ms, share * cand_ms + CALL_GAP_FLOOR_MS + noise_ms, cand_ms, share)


def _cross_check_calls(ref: SideRecord, cand: SideRecord, cand_ms: float, device_kind: str) -> CallGap | None:
    """Refuse a candidate whose timer claims less of each call than the driver's clock around it allows.

    That clock runs from the driver's `go`, sent once a call's inputs are drawn, to the reply that follows the copies
    of its outputs; the worker's timer marks lie inside. What the driver saw beyond what the timer claimed is the
    harness's own work around the call (the watch's end, the copy check, the copies, two messages), the same code in
    both roles (the checks only the candidate pays come after the reply), so the medians of that remainder, call by
    call, may differ between the roles only by a little. A timer clock rewritten from C that lags inside calls alone
    keeps time while the worker waits, and the remainder of each call holds what it took off: a claim of 55% of the
    call passed the whole-cycle comparison below (a drawn input's cost and the load on the machine dwarfed the lie).
    Each call's remainder is its own wall less its own timing, so the machine's load, which stretches both, cancels
    where a gap of walls between blocks did not. CPU only: on a GPU the timer is the device's events, and a launch's
    host cost is outside them by design."""
    if not rules(device_kind).host_timer:
        return None
    gap = call_gap(ref, cand, cand_ms)
    if gap is not None and gap.refused:
        raise ClockDisagreement(Status.REJECTED,
                                f"the candidate's reported times disagree with the driver's clock: around each call "
                                f"the driver saw {gap.short_ms:.3f} ms more beyond its timer's figure than around the "
                                f"reference's (timer tampering)")
    return gap


LEFT_RUNNING_FLOOR_MS = 0.05  # host wake-up jitter after a device-wide synchronize stays well under this
LEFT_RUNNING_SHARE = 0.25


def _refuse_work_left_running(cand: SideRecord) -> None:
    """Refuse a candidate whose calls return before their work is done: the device stays busy after the call's end
    mark on the current stream (work on a side stream the current stream never waits for). Its outputs are not ready
    for a caller on that stream, and its timings would miss the work. Judged on the median over blocks."""
    if not cand.left_running_ms or not cand.samples_ms:
        return
    left = statistics.median(cand.left_running_ms)
    if left > max(LEFT_RUNNING_FLOOR_MS, LEFT_RUNNING_SHARE * statistics.median(cand.samples_ms)):
        raise Refused(Status.REJECTED,
                      f"the device kept working {left:.3f} ms after the candidate's calls returned (work on another "
                      "stream that the current stream does not wait for): its outputs are not ready when it returns")


def _iqr(xs: list[float]) -> float:
    return Timing.from_samples(xs).iqr_ms
