"""What the native (`cpp`) coder and judge are told about the CPU: its model, the cores this process may use, the
widest SIMD it has, its cache sizes and, where the store has measured them, its copy bandwidth and peak FLOP/s.

Read from Linux's own files (`/proc/cpuinfo`, `/sys/devices/system/cpu/cpu0/cache`), never guessed: a figure that
cannot be read is None and renders as "unknown". The measured figures come from the store (`measured_cpu_roofline`)
and are passed in (`local_cpu_facts(measured=...)`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from evaluator.device.cpu_caches import cache_sizes_kib

# widest first: the first of these the CPU's flags name is its SIMD width
SIMD_LEVELS: tuple[tuple[str, str], ...] = (
    ("avx512f", "AVX-512 (512-bit, 16 floats)"),
    ("avx2", "AVX2 (256-bit, 8 floats)"),
    ("avx", "AVX (256-bit, 8 floats)"),
    ("sse4_2", "SSE4.2 (128-bit, 4 floats)"),
    ("asimd", "NEON (128-bit, 4 floats)"),
)
FLAGS_SHOWN = ("fma", "avx2", "avx512f", "avx512bw", "avx512vl", "avx512dq", "f16c")


@dataclass(frozen=True, slots=True)
class MeasuredRoofline:
    """This machine's measured copy bandwidth and peak FP32 throughput (from the store's table of them)."""

    copy_bandwidth_gbps: float | None = None
    peak_gflops: float | None = None


@dataclass(frozen=True, slots=True)
class CpuFacts:
    """What the native coder is told about the target CPU; any figure may be unknown (None)."""

    name: str
    cores: int | None = None                 # CPUs this process may run on (its affinity), what OpenMP gets
    simd: str | None = None                  # the widest vector unit, e.g. "AVX2 (256-bit, 8 floats)"
    flags: tuple[str, ...] = ()              # the SIMD-relevant flags the CPU reports (FLAGS_SHOWN)
    l1d_kib: int | None = None
    l2_kib: int | None = None
    l3_kib: int | None = None
    copy_bandwidth_gbps: float | None = None  # measured (see MeasuredRoofline), not a datasheet figure
    peak_gflops: float | None = None

    kind = "cpu"

    def with_measured(self, measured: MeasuredRoofline | None) -> "CpuFacts":
        if measured is None:
            return self
        return replace(self, copy_bandwidth_gbps=measured.copy_bandwidth_gbps, peak_gflops=measured.peak_gflops)


def parse_cpuinfo(text: str) -> tuple[str | None, tuple[str, ...]]:
    """The model name and the flags of the first processor in a /proc/cpuinfo text."""
    name: str | None = None
    flags: tuple[str, ...] = ()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and name is None:
            name = value.strip()
        elif key in ("flags", "Features") and not flags:
            flags = tuple(value.split())
    return name, flags


def simd_of(flags: tuple[str, ...]) -> str | None:
    have = set(flags)
    return next((label for flag, label in SIMD_LEVELS if flag in have), None)


def local_cpu_facts(measured: MeasuredRoofline | None = None, cpuinfo: Path = Path("/proc/cpuinfo"),
                    cache_dir: Path = Path("/sys/devices/system/cpu/cpu0/cache")) -> CpuFacts:
    """The CPU this process evaluates on."""
    try:
        name, flags = parse_cpuinfo(cpuinfo.read_text(errors="replace"))
    except OSError:
        name, flags = None, ()
    try:
        cores: int | None = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count()
    caches = cache_sizes_kib(cache_dir) if cache_dir.is_dir() else {}
    facts = CpuFacts(name=name or "CPU", cores=cores, simd=simd_of(flags),
                     flags=tuple(f for f in FLAGS_SHOWN if f in set(flags)),
                     l1d_kib=caches.get("l1d"), l2_kib=caches.get("l2"), l3_kib=caches.get("l3"))
    return facts.with_measured(measured)


def measured_cpu_roofline(store: Any, device: str) -> MeasuredRoofline | None:
    """This machine's measured copy bandwidth and peak FLOP/s, from the store's table of them (`Store.device_peaks`,
    filled by `opforge.run.peaks.ensure_cpu_peaks`); None until they are measured: the prompts then say "unknown" and
    reports show no roofline fraction on that CPU, rather than guess."""
    read = getattr(store, "device_peaks", None)
    measured = read(device) if callable(read) else None
    if measured is None:
        return None
    return MeasuredRoofline(measured.copy_gbps, measured.peak_gflops)
