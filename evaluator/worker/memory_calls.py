"""The worker's side of the CPU memory phase (`memory`): a warm-up call, then calls that the driver measures.

The driver, not this process, reads the figure (`cpu_memory.py`): before each measured call this worker frees the
previous call's outputs, gives the C heap's free pages back to the system (`malloc_trim`: a worker keeps what it
frees, `heap.keep_freed_memory`, so a buffer a call allocates again would otherwise land in pages already resident
and read as nothing) and says `armed`; the driver resets the process's peak resident set and reads it; on its `go` the
call runs, and once it is answered (`called`, its outputs still held) the driver reads the peak again. The inputs are
drawn once, before the first measured call, so they are part of what the process held before it.

The first call is not measured: it holds one-off growth (the first use of an operator's code pages, OpenMP's thread
stacks, a lazily built table), as the GPU's rule leaves out the first trial (`gpu_memory.steady_peak`). Functions of
the worker (`self`), alike in both roles; the module is watched like the worker's own (`guards._WATCHED_MODULES`).
"""

from __future__ import annotations

import ctypes
import gc
from typing import TYPE_CHECKING, Any

import torch

from evaluator.wire.commands import Go, MemoryCalls, parse_as

if TYPE_CHECKING:
    from evaluator.worker.loop import Worker


def _malloc_trim() -> Any:
    """glibc's malloc_trim, found now (before any candidate code runs); None elsewhere."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError, TypeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


_trim = _malloc_trim()


def release_free_memory() -> None:
    """Unreachable Python objects collected, then every free page of the C heap's arenas given back."""
    gc.collect()
    if _trim is not None:
        _trim(0)


def memory_calls(self: Worker, cmd: MemoryCalls) -> None:
    """A warm-up call, then `cmd.calls` calls each opened by the driver's `go`; a last reply once the checks ran."""
    rt, timer = self.rt, self.timer
    assert rt is not None and timer is not None
    variant = int(cmd.variant)
    model = self._model(variant)
    inputs = rt.inputs(variant, int(cmd.seed))
    with torch.set_grad_enabled(self.grad):
        out: Any = model(*inputs)
        timer.sync()
        for _ in range(max(int(cmd.calls), 0)):
            del out
            release_free_memory()
            self.send({"status": "armed"})
            parse_as(self.recv()[0], Go, "the driver's word to make a memory-measured call")
            out = model(*inputs)
            timer.sync()
            self.send({"status": "called"})  # the outputs are still held: they count, as on the GPU
        del out
    problem = self._refuse_reason() if self.enforce else None
    self.send({"status": "rejected", "reason": f"during the memory calls: {problem}"} if problem else
              {"status": "measured"})
