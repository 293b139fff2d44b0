"""A speedup above the suspicious threshold, re-measured by the driver's own clock: the worker's timer runs in the
candidate's process, so a claim it alone supports could be a forged clock (`docs/EVALUATOR.md`)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

from evaluator.config import EvalConfig
from evaluator.driver.connection import WorkerConnection
from evaluator.measure.blocks import Measurement, fresh_seed
from evaluator.wire.commands import Batch, Check
from evaluator.wire.replies import Batched, Checked

OUTER_ROUNDS = 3  # re-measures by the driver's clock before a >suspicious_speedup claim is refused
CLAIM_OVER_CONFIRMED = 4  # a claim this many times above what the driver's clock confirms is refused
# Whole measurements (timing, recheck, confirmation) before an unconfirmed claim is refused. The worker's own figure
# can be the noisy one: on the first GPU run an honest Triton ReLU of 64x1024 (a launch-bound call, 3-40 us) was
# timed at 36x its reference once and refused, while the driver's clock said 0.9x; its other evaluations read
# 0.1-0.5x. A forged clock claims again and is refused; an honest kernel's figure is taken from the measurement
# the driver's clock confirmed, and the verdict says a first one was not.
MEASUREMENTS_BEFORE_REFUSING = 2
# A host clock's calls too short for the per-call clock check to bound (`clock_checks.call_gap`: it lets a timer leave
# out 0.15 ms and the noise of the medians, more than such a call claims): a claimed speedup is confirmed by the
# driver's clock over batches of calls and may be at most this many times what it confirms. The per-call check then
# holds a claim within 2x, this holds it within 2x below that. Measured 2026-11-29 (2-core Zen 4 VM, 2 runs each, every
# claim forced through the batch clock): six honest small native kernels of 0.03-0.24 ms a call claimed 0.4-1.0 times
# what the batches confirmed, the relu and softmax seeds 1.2-1.3 times.
SHORT_CALL_CLAIM_OVER_CONFIRMED = 2


@dataclass(frozen=True, slots=True)
class Confirmed:
    """The worker's speedup and, above the suspicious threshold, what the driver's clock made of it."""

    speedup: float
    suspicious: bool = False
    outer_speedup: float = 0.0
    ok: bool = True
    short_calls: bool = False  # confirmed because the per-call clock check could not bound calls this short

    def note(self) -> str:
        """The verdict's words for a confirmed claim ("" where none was needed)."""
        if self.suspicious:
            return (f"; {self.speedup:.1f}x is above the suspicious threshold and was confirmed by the driver's clock "
                    f"({self.outer_speedup:.1f}x there)")
        if self.short_calls:
            return (f"; its calls are too short for the driver's clock around each call to bound its timer, so its "
                    f"{self.speedup:.2f}x was confirmed by the driver's clock over batches of calls "
                    f"({self.outer_speedup:.2f}x there)")
        return ""


def claim_bound(m: Measurement, cfg: EvalConfig) -> float | None:
    """How many times what the driver's clock confirms the worker's claim may be, where that clock must confirm it:
    above the suspicious threshold, or a claimed speedup (above 1) whose calls are so short that the per-call clock
    check lets the worker's timer leave out as much as a whole claimed call (`Measurement.per_call_allowance_ms`).
    None where the worker's figure stands as measured."""
    speedup = speedup_of(m)
    if speedup > cfg.suspicious_speedup:
        return CLAIM_OVER_CONFIRMED
    if speedup > 1.0 and m.per_call_allowance_ms is not None and \
            m.per_call_allowance_ms >= m.candidate_ms.median_ms:
        return SHORT_CALL_CLAIM_OVER_CONFIRMED
    return None


def speedup_of(m: Measurement) -> float:
    return m.reference_ms.median_ms / max(m.candidate_ms.median_ms, 1e-9)


def confirm_speedup(ref: WorkerConnection, cand: WorkerConnection, cfg: EvalConfig, m: Measurement,
                    timed_phase: Callable[[str], AbstractContextManager[None]]) -> Confirmed:
    """Where `claim_bound` asks for it, the speedup re-measured by the driver's own clock, each round inside
    `timed_phase(what)`. That clock also sees costs outside the worker's timer (garbage collection, launch queues), so
    above the suspicious threshold only a claim four times above what it can confirm is refused: forged timings claim
    orders of magnitude; on calls too short for the per-call check, twice. Its noise on small tasks can miss an honest
    claim, so a miss is re-measured (up to three rounds): any round that confirms is enough; a forged claim fails all
    of them."""
    speedup = speedup_of(m)
    bound = claim_bound(m, cfg)
    if bound is None:
        return Confirmed(speedup)
    outer_speedup = 0.0
    for _ in range(OUTER_ROUNDS):
        with timed_phase("the driver's clock check"):
            outer_ref = outer_per_call_ms(ref, m.reference_ms.median_ms, cfg)
            outer_cand = outer_per_call_ms(cand, m.candidate_ms.median_ms, cfg)
        outer_speedup = max(outer_speedup, outer_ref / max(outer_cand, 1e-6))
        if outer_speedup * bound >= speedup:
            break
    return Confirmed(speedup, suspicious=speedup > cfg.suspicious_speedup, outer_speedup=outer_speedup,
                     ok=outer_speedup * bound >= speedup, short_calls=speedup <= cfg.suspicious_speedup)


def outer_per_call_ms(conn: WorkerConnection, median_ms: float, cfg: EvalConfig) -> float:
    """Per-call time by the driver's clock alone: (inputs + calls) minus (inputs only), over a batch of fresh inputs."""
    k = int(min(20, max(3, 50.0 / max(median_ms, 1e-3))))
    estimates = []
    for _ in range(3):
        walls = []
        for calls in (False, True):
            seeds = [fresh_seed() for _ in range(k)]
            t0 = time.perf_counter()
            conn.request_as(Batch(variant=0, seeds=tuple(seeds), calls=calls), Batched, cfg.run_timeout_s,
                            "a batch of calls")
            walls.append((time.perf_counter() - t0) * 1e3)
        estimates.append(max(walls[1] - walls[0], 0.0) / k)
    conn.request_as(Check(), Checked, cfg.run_timeout_s, "the checks after the batches")  # outside the timed trips
    return statistics.median(estimates)
