"""Formatting numbers for people: times, sizes, speedups, progress lines."""

from __future__ import annotations

from evaluator.result import Timing


def format_ms(t: Timing) -> str:
    return f"{t.median_ms:.4g} ms median, IQR {t.iqr_ms:.3g} ms, {t.reps} reps"


def format_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.1f} {unit}" if unit != "B" else f"{int(size)} B"
        size /= 1024
    return f"{n} B"


def format_speedup(x: float | None) -> str:
    """Two decimals, or two significant digits below 0.1x (interpreted Triton on CPU is ~0.001x of PyTorch)."""
    if x is None:
        return "-"
    return f"{x:.2f}x" if x >= 0.1 else f"{x:.2g}x"
