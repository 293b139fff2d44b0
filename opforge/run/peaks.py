"""This machine's CPU peaks for the leaderboard's roofline: measured once per device, then read from the store."""

from __future__ import annotations

from collections.abc import Callable

from evaluator.device.cpu_peaks import METHOD, CpuPeaks, measure_cpu_peaks
from evaluator.device.info import device_info
from store import DevicePeaks, Store


def ensure_cpu_peaks(store: Store, device_name: str | None,
                     measure: Callable[[], CpuPeaks] = measure_cpu_peaks) -> DevicePeaks | None:
    """Where evaluations run on this machine's CPU (`device_name` is its name as verdicts record it): its measured
    copy bandwidth and peak FLOP/s, from the store, else measured now (a few seconds) and kept. Peaks kept by an
    older measuring method (`evaluator.device.cpu_peaks.METHOD`) are measured again: the method changed because the old
    figures misjudged kernels. None for any other device (a GPU's datasheet gives its roofline; another machine's CPU
    is measured on that machine)."""
    name = device_info("cpu").name
    if device_name != name:
        return None
    known = store.device_peaks(name)
    if known is not None and known.method == METHOD:
        return known
    peaks = measure()
    return store.set_device_peaks(name, peaks.copy_gbps, peaks.peak_gflops, peaks.threads, peaks.method)
