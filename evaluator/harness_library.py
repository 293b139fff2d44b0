"""The harness's own native library on a CPU: the fast draws (`fast_draws.py`), the line flush (`line_flush.py`) and
the driver's comparison of outputs (`native_compare.py`).

The driver builds it once per machine and compiler (the native build cache) and sends the same bytes to both
workers (`Load.harness_library`), which load it through `load_c`'s own loader (`NativeLibrary`, its calls not counted
as the candidate's launches) before any candidate code runs. A driver without a C compiler sends none: both workers
then draw with PyTorch and evict by reading a buffer, as before either existed. Scripts that time calls as the
evaluator does load the same library in their own process (`local`).
"""

from __future__ import annotations

import base64
import functools
import logging
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from evaluator.build.native_build import build_once, entry_key, open_cache

if TYPE_CHECKING:  # torch-free at import: the driver asks for the bytes, only workers and scripts load them
    from evaluator.worker.line_flush import LineFlush
    from evaluator.native import NativeLibrary
    from evaluator.native_compare import NativeCompare
    from evaluator.build.native_spec import NativeSpec

log = logging.getLogger(__name__)

NAME = "opforge_harness"


@functools.cache
def spec() -> NativeSpec:
    """The library's sources (the draws' and the flush's), functions and flags (`fast_draws.FLAGS`)."""
    from evaluator import native_compare
    from evaluator.worker import fast_draws
    from evaluator.worker import line_flush
    from evaluator.build.native_spec import NativeSpec
    return NativeSpec.from_call(NAME, fast_draws.SOURCE + line_flush.SOURCE + native_compare.SOURCE,
                                list(fast_draws.FUNCTIONS + line_flush.FUNCTIONS + native_compare.FUNCTIONS),
                                list(fast_draws.FLAGS))


@functools.cache
def library_text() -> str | None:
    """The driver's side: the library's bytes (base64, for `Load.harness_library`), built once per machine and
    compiler and kept in the native build cache; None where it cannot be built."""
    built = spec()
    cache = open_cache()
    if cache is not None:
        outcome = cache.get_or_build(built, context="the harness's library")
    else:
        with tempfile.TemporaryDirectory(prefix="harness-build-") as work:
            outcome = build_once(built, entry_key(built), Path(work), timeout_s=120)
    if outcome.status != "built":
        why = next(iter((outcome.log or "").strip().splitlines()[-1:]), outcome.status)
        log.warning("the harness's native library did not build (%s): on a CPU, a task's random inputs are drawn by "
                    "PyTorch (one thread: slower timed calls) and cold calls are evicted by reading a buffer", why)
        return None
    return base64.b64encode(outcome.library).decode("ascii")


def load(text: str, keep_file: bool = True) -> NativeLibrary:
    """The workers' side: the library loaded from the driver's bytes. OSError or ValueError where they are not one.
    Without `keep_file`, its file is removed once loaded (a process's own copy: nothing left in the temporary
    directory by each command)."""
    from evaluator.native import NativeLibrary
    path = Path(tempfile.mkdtemp(prefix="harness-")) / f"lib{NAME}.so"
    path.write_bytes(base64.b64decode(text))
    try:
        return NativeLibrary(NAME, spec().prototypes(), path, counted=False)
    finally:
        if not keep_file:
            path.unlink()
            path.parent.rmdir()


@functools.cache
def local() -> NativeLibrary | None:
    """This process's own copy (the driver's comparisons, benchmark scripts, the stored copy bandwidth), or None where
    it cannot be built."""
    text = library_text()
    return None if text is None else load(text, keep_file=False)


def local_flush() -> LineFlush | None:
    """The line flush in this process, for a `CallTimer` that should evict as the evaluator's workers do."""
    from evaluator.worker.line_flush import LineFlush
    return LineFlush.of(local())


@functools.cache
def native_compare() -> NativeCompare | None:
    """This process's (the driver's) comparison of outputs, from its copy of the library; None where it could not be
    built."""
    from evaluator.native_compare import NativeCompare
    library = local()
    return None if library is None else NativeCompare(library)
