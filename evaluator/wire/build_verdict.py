"""A build's verdict and the kind of build a worker asks for, declared once for the three builds: CUDA `load_inline`
(`build/cuda.py`), CPU `load_inline` extensions (`cpu_extension.py`) and native `load_c` libraries (`native.py`).

The driver's build server (`build/stage.py`, `native_stage.py`) answers each request with a `commands.Built` whose
`verdict` is one of these; the worker reads it from that parsed command (`guards.py`, `build/cuda.py`,
`cpu_extension.py`), never from a string of its own.
"""

from __future__ import annotations

from enum import StrEnum


class BuildVerdict(StrEnum):
    COMPILED = "compiled"  # CUDA, compile only (no GPU here): compiles, nothing to load
    LINKED = "linked"  # a loadable extension (CUDA or CPU); its bytes travel with the answer
    BUILT = "built"  # a native library (load_c); its bytes travel with the answer
    COMPILE_ERROR = "compile_error"  # the sources do not compile; the log says why
    REFUSED = "refused"  # the driver will not build this (a spec it refuses, too many builds, no compiler, ...)
    SKIPPED = "skipped"  # CUDA only: no cached build here; the worker builds privately
    TIMEOUT = "timeout"  # the compiler did not finish in time
    UNAVAILABLE = "unavailable"  # the sandboxed builder does not work here


class BuildKind(StrEnum):
    """What a worker's build request asks to build (its `kind`)."""

    CUDA = "cuda"
    NATIVE = "native"
    CPU_EXTENSION = "cpu_extension"

