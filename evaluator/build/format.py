"""What the build caches record about a toolchain, shared by the CUDA build cache (`build/cache.py`) and the CPU
extension builds (`cpu_extension_build.py`): the format of their entries and a compiler's version line."""

from __future__ import annotations

import functools
import subprocess

BUILD_FORMAT = 1


@functools.lru_cache(maxsize=16)
def tool_version(exe: str | None, last_line: bool) -> str:
    """The first (or last) line a compiler prints for `--version`; "none" without one, "unknown" where it says none."""
    if exe is None:
        return "none"
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60).stdout.splitlines()
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    out = [line.strip() for line in out if line.strip()]
    return (out[-1] if last_line else out[0]) if out else "unknown"
