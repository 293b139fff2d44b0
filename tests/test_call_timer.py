"""The timer through its clock seam (issue 15, finding 2): the order of marks, flushes and synchronisations around a
call, the empty call's calibration, and work left running after a call, with a recording fake clock."""

from __future__ import annotations

import pytest
import torch

from evaluator import timing
from evaluator.connection import Refused
from evaluator.measure import SideRecord, _refuse_work_left_running


class RecordingClock:
    """A device clock whose time only moves when told: `busy_ms` is work the device still has after the call."""

    resolution_ms = 1e-6

    def __init__(self) -> None:
        self.log: list[str] = []
        self.now_ms = 0.0
        self.device_busy_until_ms = 0.0

    def flush(self) -> None:
        self.log.append("flush")

    def mark(self) -> float:
        self.log.append("mark")
        self.now_ms += 0.002  # every mark costs the same 2 us
        return self.now_ms

    def sync(self) -> None:
        self.log.append("sync")
        self.now_ms = max(self.now_ms, self.device_busy_until_ms) + 0.010  # a wake-up after the device is idle

    def elapsed_ms(self, start: float, end: float) -> float:
        return end - start

    def call(self, ms: float, left_ms: float = 0.0):  # noqa: ANN201
        def fn() -> str:
            self.log.append("call")
            self.now_ms += ms
            self.device_busy_until_ms = self.now_ms + left_ms
            return "out"
        return fn


def _timer(clock: RecordingClock) -> timing.CallTimer:
    timer = timing.CallTimer(torch.device("cpu"), clock)
    timer.calibrate(reps=5)
    clock.log.clear()
    return timer


def test_marks_are_around_the_call_with_no_synchronisation_inside():
    clock = RecordingClock()
    timer = _timer(clock)
    ms, out = timer.time_call(clock.call(1.0), [])
    assert out == "out"
    assert clock.log == ["flush", "mark", "call", "mark", "sync", "mark", "sync"]
    assert ms == pytest.approx(1.0)  # the empty call's two marks are calibrated away; no wake-up is inside


def test_the_empty_call_is_calibrated_once_and_subtracted():
    clock = RecordingClock()
    timer = timing.CallTimer(torch.device("cpu"), clock)
    assert timer.calibrate(reps=5) == pytest.approx(0.002)
    assert timer.settle_overhead_ms == pytest.approx(0.014)
    ms, _ = timer.time_call(clock.call(0.0), [])
    assert ms == clock.resolution_ms  # an empty call reads as the clock's resolution, never zero or negative


def test_work_left_running_after_the_call_is_measured_not_timed():
    clock = RecordingClock()
    timer = _timer(clock)
    ms, _ = timer.time_call(clock.call(0.1, left_ms=0.5), [])
    assert ms == pytest.approx(0.1)
    assert timer.left_running_ms == pytest.approx(0.5, abs=0.005)  # less one mark's cost
    timer.time_call(clock.call(0.1), [])
    assert timer.left_running_ms == pytest.approx(0.0, abs=1e-9)


def test_the_cpu_timer_is_the_same_code_with_the_host_clock():
    timer = timing.CallTimer(torch.device("cpu"))
    assert isinstance(timer.clock, timing.HostClock)
    timer.calibrate()
    ms, out = timer.time_call(lambda x: x + 1, [torch.ones(4)])
    assert ms > 0 and torch.equal(out, torch.full((4,), 2.0))


def test_the_driver_refuses_calls_that_leave_the_device_busy():
    honest = SideRecord(samples_ms=[1.0] * 5, left_running_ms=[0.004, 0.01, 0.003])
    _refuse_work_left_running(honest)
    cheat = SideRecord(samples_ms=[0.01] * 5, left_running_ms=[0.3, 0.2, 0.25])
    with pytest.raises(Refused, match="kept working 0.250 ms after"):
        _refuse_work_left_running(cheat)


def test_the_cuda_runtime_torch_loaded_is_found_first():
    maps = ("7f00-7f01 r-xp 00000000 08:01 1 /usr/lib/libc.so.6\n"
            "7f02-7f03 r-xp 00000000 08:01 2 /env/site-packages/nvidia/cuda_runtime/lib/libcudart.so.12\n"
            "7f03-7f04 r--p 00001000 08:01 2 /env/site-packages/nvidia/cuda_runtime/lib/libcudart.so.12\n"
            "7f05-7f06 rw-p 00000000 00:00 0 \n")
    assert timing.loaded_libcudart(maps) == ["/env/site-packages/nvidia/cuda_runtime/lib/libcudart.so.12"]
    assert timing.loaded_libcudart("7f05-7f06 rw-p 00000000 00:00 0 [heap]\n") == []
    names = timing.libcudart_candidates()
    assert names[-3:] == ["libcudart.so", "libcudart.so.13", "libcudart.so.12"]  # by name, last
