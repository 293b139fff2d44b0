"""This CPU's cache sizes, read from Linux's sysfs (`/sys/devices/system/cpu/cpu0/cache`), never guessed.

The evaluator needs them to time a CPU call from a cold cache (`timing.HostClock`); the native coder's prompts show
them (`agents/cpu_facts.py`).
"""

from __future__ import annotations

from pathlib import Path

CACHE_DIR = Path("/sys/devices/system/cpu/cpu0/cache")


def _size_kib(text: str) -> int | None:
    text = text.strip().upper()
    scale = {"K": 1, "M": 1024, "G": 1024 * 1024}.get(text[-1:], None)
    digits = text[:-1] if scale else text
    if not digits.isdigit():
        return None
    return int(digits) * (scale or 1) if scale else int(digits) // 1024


def cache_sizes_kib(cache_dir: Path = CACHE_DIR) -> dict[str, int]:
    """{"l1d": .., "l2": .., "l3": ..} from a sysfs `cpuN/cache` directory (levels it lacks are left out)."""
    sizes: dict[str, int] = {}
    for index in sorted(cache_dir.glob("index*")) if cache_dir.is_dir() else ():
        try:
            level = (index / "level").read_text().strip()
            kind = (index / "type").read_text().strip()
            size = _size_kib((index / "size").read_text())
        except OSError:
            continue
        if size is None or kind == "Instruction":
            continue
        sizes["l1d" if level == "1" else f"l{level}"] = size
    return sizes
