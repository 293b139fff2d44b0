"""The driver's comparison of a worker's timer path with the zygote it was forked from (`evaluator/verify/timer_path.py`),
on real processes: this test's process plays the zygote and forks a child that leaves the path alone, points the
timer builtin at another method entry, or rewrites a GOT slot of the interpreter library."""

from __future__ import annotations

import ctypes
import mmap
import os
import time

import pytest

from evaluator.driver.connection import Refused
from evaluator.verify import timer_path


TIMER = id(time.perf_counter_ns)


def test_a_child_that_leaves_the_timer_path_alone_matches_its_parent(fork_child):
    pid = fork_child(lambda: None)
    assert timer_path.changed(pid, os.getpid(), TIMER) == []
    assert timer_path.parent_pid(pid) == os.getpid()


def test_a_child_that_points_the_timer_builtin_at_another_method_entry_is_found(fork_child):
    def swap() -> None:  # perf_counter_ns now runs monotonic_ns's C function: data only, no code page written
        ctypes.c_uint64.from_address(TIMER + 16).value = ctypes.c_uint64.from_address(id(time.monotonic_ns) + 16).value

    pid = fork_child(swap)
    assert timer_path.changed(pid, os.getpid(), TIMER) == ["the timer builtin's object"]


def test_a_child_that_rewrites_a_bound_got_slot_of_the_interpreter_is_found(fork_child):
    own = timer_path._Memory(os.getpid())
    try:
        slots = [s for s in timer_path.spans(os.getpid(), TIMER, own) if s.unbound is not None]
    finally:
        own.close()
    assert slots, "the interpreter library has bound GOT slots"
    slot = slots[0]

    def rewrite() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        page = slot.address & ~(mmap.PAGESIZE - 1)
        assert libc.mprotect(page, mmap.PAGESIZE, 3) == 0  # read, write (a RELRO page is read-only)
        cell = ctypes.c_uint64.from_address(slot.address)
        cell.value = cell.value + 16  # another address in the same library: still bound elsewhere

    pid = fork_child(rewrite)
    assert timer_path.changed(pid, os.getpid(), TIMER) == [slot.what]
    with pytest.raises(Refused, match="path to its timer's clock"):
        timer_path.refuse_changed_timer_path(pid, TIMER)


def test_the_spans_cover_the_timer_object_its_entry_the_linkers_globals_and_the_vdso():
    own = timer_path._Memory(os.getpid())
    try:
        whats = {s.what for s in timer_path.spans(os.getpid(), TIMER, own)}
    finally:
        own.close()
    assert "the timer builtin's object" in whats and "the timer builtin's method entry" in whats
    assert any(w.startswith("the dynamic linker's") for w in whats) and "the vDSO" in whats


def test_nothing_is_judged_where_nothing_can_be_read():
    assert timer_path.refuse_changed_timer_path(None, TIMER) is False
    assert timer_path.changed(2 ** 22 + 12345, os.getpid(), TIMER) is None


def test_a_child_that_points_the_harness_reference_at_another_clock_is_found(fork_child):
    from evaluator.worker import timing

    reference = timing.timer_reference()
    assert reference is not None, "CPython 3.11's dict layout: the timing module's reference to its clock is found"
    assert ctypes.c_uint64.from_address(reference).value == id(timing.timer_clock())

    def swap() -> None:  # HostClock.mark now reads monotonic_ns: neither the builtin nor any code page is touched
        ctypes.c_uint64.from_address(reference).value = id(time.monotonic_ns)

    assert timer_path.changed(fork_child(lambda: None), os.getpid(), TIMER, reference) == []
    pid = fork_child(swap)
    assert timer_path.changed(pid, os.getpid(), TIMER) == []  # the builtin itself is as it was
    assert timer_path.changed(pid, os.getpid(), TIMER, reference) == ["the harness's reference to its timer builtin"]
