"""Why a copy's bandwidth depends on how it is timed: the CPU roofline's copy (`evaluator/device/cpu_peaks.py`) measured
several ways side by side, in shuffled rounds.

The stored copy bandwidth is the memory bound of every CPU kernel's roofline fraction, and until 2026-11-24 it was a
bare copy of two 64 MiB arrays timed back to back, while kernels (and the copy timed beside them, `copy_like`) are
timed by `CallTimer`: inputs evicted first, the passive OpenMP pool woken by the call, a fresh output each call.
This script times each of those differences on its own: size, eviction and pool wake-up, fresh or reused output
(with the minor page faults each call takes), and an empty parallel region after an eviction (the fixed cost every
timed call pays).

    .venv/bin/python scripts/bench_copy.py --rounds 30

Prints a Markdown table (medians and minima; on a shared machine the minima are the figures to compare).
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import statistics
import sys
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evaluator.sandbox.zygote_env import openmp_environment  # noqa: E402  (light: imports no torch)

os.environ.update(openmp_environment())  # the workers' OpenMP settings, before torch loads libgomp

import torch  # noqa: E402

from evaluator.device.cpu_peaks import COPY_BYTES, _library, copy_like, measure_cpu_peaks  # noqa: E402
from evaluator.harness_library import local_flush  # noqa: E402
from evaluator.worker.timing import CallTimer  # noqa: E402

MIB = 1 << 20


def _faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def variants(timer: CallTimer) -> dict[str, tuple[Callable[[], float], int]]:
    """name -> (a function timing one call in ms, bytes moved by it)."""
    lib = _library()

    def reused(moved: int) -> tuple[Callable[[torch.Tensor], torch.Tensor], torch.Tensor]:
        n = moved // 8
        src, dst = torch.ones(n), torch.zeros(n)
        lib.copy_floats(src, dst, n)  # both written once: no page faults later

        def copy(source: torch.Tensor) -> torch.Tensor:
            lib.copy_floats(source, dst, n)
            return dst
        return copy, src

    def bare(fn: Callable[[torch.Tensor], torch.Tensor], src: torch.Tensor) -> Callable[[], float]:
        def once() -> float:
            start = time.perf_counter()
            fn(src)
            return (time.perf_counter() - start) * 1e3
        return once

    def timed(fn: Callable[[torch.Tensor], torch.Tensor], src: torch.Tensor) -> Callable[[], float]:
        return lambda: timer.time_call(fn, [src])[0]

    big, big_src = reused(128 * MIB)  # two 64 MiB arrays: 128 MiB moved
    out: dict[str, tuple[Callable[[], float], int]] = {
        "bare, back to back, 2 x 64 MiB arrays (the stored copy until 2026-11-24)": (bare(big, big_src), 128 * MIB),
        "timed cold, 2 x 64 MiB arrays, output reused": (timed(big, big_src), 128 * MIB),
    }
    for moved in (COPY_BYTES, 32 * MIB):
        fn, src = reused(moved)
        label = " (the stored copy now)" if moved == COPY_BYTES else ""
        out[f"timed cold, {moved // MIB} MiB moved, output reused{label}"] = (timed(fn, src), moved)
    for moved in (32 * MIB, COPY_BYTES):
        fn, src = copy_like(moved)
        label = f"timed cold, {moved // MIB} MiB moved, fresh output (`copy_like`, beside a seed)"
        out[label] = (timed(fn, src), moved)
    empty_src = torch.ones(8)

    def empty(source: torch.Tensor) -> torch.Tensor:
        lib.copy_floats(source, source, 0)  # a parallel region with nothing to do
        return source
    out["an empty parallel region after the eviction"] = (timed(empty, empty_src), 0)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=30, help="calls of each variant, in shuffled rounds")
    args = parser.parse_args()
    load = os.getloadavg()
    timer = CallTimer(torch.device("cpu"), cold_from_bytes=0, flush=local_flush())  # every call evicted
    timer.calibrate()
    table = variants(timer)
    times: dict[str, list[float]] = {k: [] for k in table}
    faults: dict[str, int] = {k: 0 for k in table}
    names = list(table)
    for _ in range(max(1, args.rounds)):
        random.shuffle(names)
        for name in names:
            before = _faults()
            times[name].append(table[name][0]())
            faults[name] += _faults() - before
    peaks = measure_cpu_peaks()
    print(f"Command: `{' '.join(['.venv/bin/python', *sys.argv])}`  ")
    print(f"Date: {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; load average {load[0]:.1f} at the start, "
          f"{os.getloadavg()[0]:.1f} at the end; {torch.get_num_threads()} threads  ")
    print(f"`measure_cpu_peaks()` after the rounds: copy {peaks.copy_gbps:.1f} GB/s  ")
    print()
    print("| copy | moved | median ms | min ms | GB/s at the median | GB/s at the min | page faults a call |")
    print("|---|---|---|---|---|---|---|")
    for name, (_, moved) in table.items():
        med, low = statistics.median(times[name]), min(times[name])
        rate = (f"{moved / med / 1e6:.1f} | {moved / low / 1e6:.1f}") if moved else "- | -"
        per_call = faults[name] / len(times[name])
        print(f"| {name} | {moved // MIB} MiB | {med:.3f} | {low:.3f} | {rate} | {per_call:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
