"""The timing protocol: one timed call (inside a worker) and the statistics the driver stops on.

CPU: a monotonic nanosecond clock around the call. GPU: CUDA events around the call followed by a device-wide
synchronize (so work left on side streams is inside the measurement), with the L2 cache flushed before each call.
Every primitive is captured when this module is imported, before any candidate code exists.
"""

from __future__ import annotations

import math
import statistics
import time
from typing import Any, Callable

import torch

_now_ns = time.perf_counter_ns
L2_FLUSH_BYTES = 256 * 2**20  # at least twice the L2 of current GPUs (H100: 50 MiB, B200: 126 MiB)


class CallTimer:
    def __init__(self, device: torch.device):
        self.device = device
        self.cuda = device.type == "cuda"
        if self.cuda:
            self._sync: Callable[[], None] = torch._C._cuda_synchronize
            self._event = torch.cuda.Event
            self._record = torch.cuda.Event.record
            self._elapsed = torch.cuda.Event.elapsed_time
            self._flush_buf = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int32, device=device)
            self._reset_persisting_l2 = _persisting_l2_reset()

    def sync(self) -> None:
        if self.cuda:
            self._sync()

    def time_call(self, fn: Callable[..., Any], args: list[Any]) -> tuple[float, Any]:
        """Milliseconds of one call, and its result."""
        if not self.cuda:
            t0 = _now_ns()
            out = fn(*args)
            t1 = _now_ns()
            return (t1 - t0) / 1e6, out
        self._reset_persisting_l2()  # lines pinned with an access-policy window survive an ordinary flush
        self._flush_buf.zero_()
        start, end = self._event(enable_timing=True), self._event(enable_timing=True)
        self._sync()
        self._record(start)
        out = fn(*args)
        self._sync()
        self._record(end)
        self._sync()
        return float(self._elapsed(start, end)), out


def _persisting_l2_reset() -> Callable[[], None]:
    """cudaCtxResetPersistingL2Cache from the CUDA runtime that torch loaded, or a no-op where it cannot be found."""
    import ctypes
    import glob
    import os
    candidates = ["libcudart.so", "libcudart.so.12", "libcudart.so.13"]
    torch_lib = os.path.join(os.path.dirname(torch.__file__), "lib")
    candidates += glob.glob(os.path.join(torch_lib, "libcudart*.so*"))
    candidates += glob.glob(os.path.join(os.path.dirname(torch_lib), "..", "nvidia", "cu*", "lib", "libcudart.so*"))
    for name in candidates:
        try:
            fn = ctypes.CDLL(name).cudaCtxResetPersistingL2Cache
        except (OSError, AttributeError):
            continue
        return lambda: None if fn() == 0 else None
    return lambda: None


def relative_standard_error(samples_ms: list[float]) -> float:
    """The median's standard error over the median: the stopping rule for repetitions.

    Robust, as the median is: the spread is estimated from the interquartile range (IQR / 1.349 for a normal
    distribution) and the median's standard error is 1.2533 sigma / sqrt(n). The mean's formula let one preempted
    call among hundreds of microsecond calls keep a block running to its time cap."""
    n = len(samples_ms)
    if n < 2:
        return math.inf
    xs = sorted(samples_ms)
    med = statistics.median(xs)
    if med <= 0:
        return math.inf
    iqr = _quantile(xs, 0.75) - _quantile(xs, 0.25)
    return 1.2533 * (iqr / 1.349) / math.sqrt(n) / med


def _quantile(sorted_xs: list[float], q: float) -> float:
    pos = (len(sorted_xs) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


def now_ms() -> float:
    return _now_ns() / 1e6
