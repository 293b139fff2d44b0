"""The candidate's timed calls, with proof of a patched clock before the clocks' inference.

A clock that the candidate's native code patched (a jump written over the C library's `clock_gettime`, a pointer on
the timer's path swapped) is refused by what the driver reads of the process: the code pages it wrote
(`verify/code_pages.py`) and its timer's path against the zygote it was forked from (`verify/timer_path.py`). The
clocks' comparison (`measure/clock_checks.py`) only infers a lag. So when the clocks disagree the driver reads those
first and refuses for the patch by name; the measurement is then retried once (a burst of other work can fall on one
side's blocks, while a forged clock disagrees every time: an honest tune was refused so), and read again after the
timed calls whatever the clocks said. Before 2026-11-29 the reads came only after timed calls that had passed the
clock check, and on a slow host a patched clock's lag tripped the clock check first
(`tests/cheats/native_clock_jump_lag_large.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from evaluator.measure.clock_checks import ClockDisagreement
from evaluator.verify.code_pages import refuse_written_code
from evaluator.verify.timer_path import refuse_changed_timer_path

M = TypeVar("M")


def refuse_patched_clock(pid: int | None, timer_object: int | None, timer_reference: int | None) -> None:
    """Refuse a candidate process (`pid`; None: unreadable, nothing refused) that wrote code pages or changed its
    timer's path."""
    refuse_written_code(pid)
    refuse_changed_timer_path(pid, timer_object, timer_reference)


def measure_with_proof_first(measure_once: Callable[[], M], pid: int | None, timer_object: int | None,
                             timer_reference: int | None) -> M:
    """`measure_once()`, retried once on a clock disagreement; the patch reads before each refusal and after."""
    try:
        m = measure_once()
    except ClockDisagreement:
        refuse_patched_clock(pid, timer_object, timer_reference)
        try:
            m = measure_once()
        except ClockDisagreement:
            refuse_patched_clock(pid, timer_object, timer_reference)
            raise
    refuse_patched_clock(pid, timer_object, timer_reference)
    return m
