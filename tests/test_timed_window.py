"""What the harness itself runs inside a timed call's window (issue 36): between the start mark and the end mark of
`CallTimer`, whatever the call and whichever side it is, the timer makes exactly two calls from its own frame, the
call under test and the end mark, and nothing else of Python's. Counted through the timer's clock seam (a clock that
reports its marks) and the interpreter's profile hook, on a CPU: on a GPU the same code runs with CUDA events as the
marks (`scripts/gpu_proof.py --parts timer` checks it there), so a launch-bound kernel is charged for its own launches
and not for the harness's Python."""

from __future__ import annotations

import sys
from typing import Any

import pytest
import torch

from evaluator.worker.timing import CallTimer, HostClock


class MarkingClock(HostClock):
    """The host clock, with each mark counted: the window is open from the first mark's return to the second's call."""

    def __init__(self) -> None:
        self.marks = 0

    def mark(self) -> int:
        self.marks += 1
        return super().mark()


def calls_in_window(fn: Any, args: list[Any]) -> list[str]:
    """The calls the timer's own frame made inside the timed window of one call of `fn(*args)`."""
    clock = MarkingClock()
    timer = CallTimer(torch.device("cpu"), clock=clock, cold_from_bytes=1 << 62)
    seen: list[str] = []
    raw_code = CallTimer._raw.__code__

    def profile(frame: Any, event: str, arg: Any) -> None:
        if clock.marks != 1:
            return
        if event == "call" and frame.f_back is not None and frame.f_back.f_code is raw_code:
            seen.append(frame.f_code.co_name)
        elif event == "c_call" and frame.f_code is raw_code:
            seen.append(getattr(arg, "__name__", repr(arg)))

    sys.setprofile(profile)
    try:
        timer.time_call(fn, args)
    finally:
        sys.setprofile(None)
    return seen


class Eager(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def python_kernel(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x + y


@pytest.mark.parametrize("fn, args", [(Eager(), [torch.randn(64)]),
                                      (python_kernel, [torch.randn(64), torch.randn(64)]),
                                      (torch.relu, [torch.randn(64)])],
                         ids=["module", "python-function", "builtin"])
def test_the_timed_window_holds_the_call_and_the_end_mark_alone(fn, args):
    seen = calls_in_window(fn, args)
    assert len(seen) == 2, seen
    assert seen[-1] == "mark"  # the end mark; before it, the call under test in whatever form it takes


def test_a_harness_call_added_inside_the_window_is_seen():
    """The count can fail: a timer whose window also holds a sync is caught."""
    class SyncingTimer(CallTimer):
        def _raw(self, fn, args):  # noqa: ANN001, ANN202 - the timer's own signature
            clock = self.clock
            start = clock.mark()
            out = fn(*args)
            clock.sync()
            end = clock.mark()
            return clock.elapsed_ms(start, end), clock.elapsed_ms(start, end), out

    clock = MarkingClock()
    timer = SyncingTimer(torch.device("cpu"), clock=clock, cold_from_bytes=1 << 62)
    seen: list[str] = []
    code = SyncingTimer._raw.__code__

    def profile(frame: Any, event: str, arg: Any) -> None:
        if clock.marks == 1 and event == "call" and frame.f_back is not None and frame.f_back.f_code is code:
            seen.append(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        timer.time_call(python_kernel, [torch.randn(4), torch.randn(4)])
    finally:
        sys.setprofile(None)
    assert seen == ["python_kernel", "sync", "mark"]
