"""When one verdict's speedup is better than another's: only beyond the error its own timings state.

A speedup is a ratio of two medians, each with a standard error (`Timing.se_ms`); its log has the error of the two
relative errors added in quadrature. Two speedups closer than `NOISE_Z` of their combined errors are not told apart,
and among such ties the one measured first is kept: a search's best, and the kernel the archive offers to later runs,
change only on a difference the timings could tell (`best_within_noise`). Both use this one rule so that what a run
reports as its best is what the next run is offered.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TypeVar

from evaluator.result import EvalResult

NOISE_Z = 2.0  # one speedup is higher than another only where its log is this many combined standard errors higher

T = TypeVar("T")


def log_speedup_se(result: EvalResult | None) -> float:
    """The standard error of log(speedup) from the verdict's two medians' standard errors; 0 where it does not say."""
    if result is None or result.candidate_ms is None or result.reference_ms is None:
        return 0.0
    parts = [(t.se_ms or 0.0) / t.median_ms for t in (result.candidate_ms, result.reference_ms) if t.median_ms > 0]
    return math.sqrt(sum(p * p for p in parts))


def best_within_noise(items: Sequence[T], speedup: Callable[[T], float | None],
                      result: Callable[[T], EvalResult | None], order: Callable[[T], object]) -> T | None:
    """Among `items` with a positive speedup, those within noise of the highest, the first by `order` (the earliest
    measured); None when no item has a speedup."""
    scored = [(math.log(s), log_speedup_se(result(item)), item) for item in items
              if (s := speedup(item)) is not None and s > 0]
    if not scored:
        return None
    top_log, top_se, _ = max(scored, key=lambda t: t[0])
    tied = [item for log_s, se, item in scored if top_log - log_s <= NOISE_Z * math.hypot(top_se, se)]
    return min(tied, key=order)  # type: ignore[arg-type]
