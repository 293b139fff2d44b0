"""A speedup above the suspicious threshold, re-measured by the driver's own clock: the worker's timer runs in the
candidate's process, so a claim it alone supports could be a forged clock (`docs/EVALUATOR.md`)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

from evaluator.config import EvalConfig
from evaluator.driver.connection import WorkerConnection
from evaluator.measure.blocks import Measurement, outer_per_call_ms

OUTER_ROUNDS = 3  # re-measures by the driver's clock before a >suspicious_speedup claim is refused
CLAIM_OVER_CONFIRMED = 4  # a claim this many times above what the driver's clock confirms is refused
# Whole measurements (timing, recheck, confirmation) before an unconfirmed claim is refused. The worker's own figure
# can be the noisy one: on the first GPU run an honest Triton ReLU of 64x1024 (a launch-bound call, 3-40 us) was
# timed at 36x its reference once and refused, while the driver's clock said 0.9x; its other evaluations read
# 0.1-0.5x. A forged clock claims again and is refused; an honest kernel's figure is taken from the measurement
# the driver's clock confirmed, and the verdict says a first one was not.
MEASUREMENTS_BEFORE_REFUSING = 2


@dataclass(frozen=True, slots=True)
class Confirmed:
    """The worker's speedup and, above the suspicious threshold, what the driver's clock made of it."""

    speedup: float
    suspicious: bool = False
    outer_speedup: float = 0.0
    ok: bool = True


def speedup_of(m: Measurement) -> float:
    return m.reference_ms.median_ms / max(m.candidate_ms.median_ms, 1e-9)


def confirm_speedup(ref: WorkerConnection, cand: WorkerConnection, cfg: EvalConfig, m: Measurement,
                    timed_phase: Callable[[str], AbstractContextManager[None]]) -> Confirmed:
    """Above the suspicious threshold, the speedup re-measured by the driver's own clock, each round inside
    `timed_phase(what)`. That clock also sees costs outside the worker's timer (garbage collection, launch queues), so
    only a claim four times above what it can confirm is refused: forged timings claim orders of magnitude. Its noise
    on small tasks can miss an honest claim, so a miss is re-measured (up to three rounds): any round that confirms
    is enough; a forged claim fails all of them."""
    speedup = speedup_of(m)
    if speedup <= cfg.suspicious_speedup:
        return Confirmed(speedup)
    outer_speedup = 0.0
    for _ in range(OUTER_ROUNDS):
        with timed_phase("the driver's clock check"):
            outer_ref = outer_per_call_ms(ref, m.reference_ms.median_ms, cfg)
            outer_cand = outer_per_call_ms(cand, m.candidate_ms.median_ms, cfg)
        outer_speedup = max(outer_speedup, outer_ref / max(outer_cand, 1e-6))
        if outer_speedup * CLAIM_OVER_CONFIRMED >= speedup:
            break
    return Confirmed(speedup, suspicious=True, outer_speedup=outer_speedup,
                     ok=outer_speedup * CLAIM_OVER_CONFIRMED >= speedup)
