"""`driver/patched_clock.py`: when the clocks disagree, the driver's reads of the candidate's process (its code pages,
its timer's path) come first, so a patched clock is refused for the patch by name; otherwise the measurement is
retried once and the disagreement stands. The reads are the real ones, on real processes: children forked from this test's."""

from __future__ import annotations

import ctypes
import mmap

import pytest

from evaluator import Status
from evaluator.driver.connection import Refused
from evaluator.driver.patched_clock import measure_with_proof_first
from evaluator.measure.clock_checks import ClockDisagreement


def _disagreeing(calls: list[int], times: int):
    def measure_once() -> str:
        calls.append(1)
        if len(calls) <= times:
            raise ClockDisagreement(Status.REJECTED, "the clocks disagree (timer tampering)")
        return "measured"
    return measure_once


def test_a_first_disagreement_is_measured_again_and_a_second_stands():
    calls: list[int] = []
    assert measure_with_proof_first(_disagreeing(calls, 1), None, None, None) == "measured" and len(calls) == 2
    calls.clear()
    with pytest.raises(ClockDisagreement):
        measure_with_proof_first(_disagreeing(calls, 5), None, None, None)
    assert len(calls) == 2


def _write_a_code_page() -> None:
    """Makes a page of this process's C library code writable and writes one byte back unchanged: a private copy of a
    file's code page, which the driver's read of /proc/<pid>/smaps sees, as it sees the cheats' jumps."""
    libc = ctypes.CDLL(None, use_errno=True)
    at = ctypes.cast(libc.getpid, ctypes.c_void_p).value or 0
    page = at & ~(mmap.PAGESIZE - 1)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    libc.mprotect(page, mmap.PAGESIZE, 7)
    byte = ctypes.c_ubyte.from_address(at)
    byte.value = byte.value
    libc.mprotect(page, mmap.PAGESIZE, 5)


def test_an_unpatched_process_keeps_the_clocks_verdict(fork_child):
    pid = fork_child(lambda: None)
    calls: list[int] = []
    with pytest.raises(ClockDisagreement):  # nothing to prove: the clocks' refusal stands, after one retry
        measure_with_proof_first(_disagreeing(calls, 5), pid, None, None)
    assert len(calls) == 2


def test_a_process_that_wrote_its_code_is_refused_for_that_before_the_clocks_are_asked_again(fork_child):
    pid = fork_child(_write_a_code_page)
    calls: list[int] = []
    with pytest.raises(Refused) as info:
        measure_with_proof_first(_disagreeing(calls, 5), pid, None, None)
    assert not isinstance(info.value, ClockDisagreement), info.value.reason
    assert "rewrote machine code" in info.value.reason and len(calls) == 1  # refused before any retry
