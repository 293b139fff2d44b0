"""The timing protocol: one timed call (inside a worker) and the statistics the driver stops on.

One code path for every device, its clock injected: CPU, a monotonic nanosecond clock around the call; GPU, CUDA
events on the current stream around the call after an L2 flush (as `triton.testing.do_bench`). Both time a call from
a cold cache where a real pipeline would have one: on the CPU, inputs of half the last-level cache or more (at most
16 MiB) are pushed out of every cache level first (`evict`, their own lines flushed: `line_flush.py`), since drawing
a call's fresh inputs just left up to a last-level cache's worth of them in it (31 MiB inputs then ran at cache
speed, past the memory's bandwidth), and the call's outputs after it. A device-wide
synchronize after the end mark tells how long work left on other streams kept the device busy (a fact the driver
judges). Every primitive is captured when the timer is built, before any candidate code exists.
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

import torch

from evaluator.device.cpu_caches import CACHE_DIR, cache_sizes_kib
from evaluator.device.rules import rules
from evaluator.result import median_standard_error_ms
from evaluator.worker.private_builtins import BUILTINS

__builtins__ = BUILTINS  # type: ignore[assignment]  # the harness's own copy (private_builtins.py)

_now_ns = time.perf_counter_ns
L2_FLUSH_BYTES = 256 * 2**20  # at least twice the L2 of current GPUs (H100: 50 MiB, B200: 126 MiB)


class HostClock:
    """The CPU's clock: marks are host nanoseconds; nothing to flush right before the mark or wait for. (A CPU call's
    inputs are pushed out of the caches earlier, by `CallTimer.evict`, before the profiler's watch opens.)"""

    resolution_ms = 1e-6

    def flush(self) -> None:
        pass

    def mark(self) -> int:
        return _now_ns()

    def sync(self) -> None:
        pass

    def elapsed_ms(self, start: Any, end: Any) -> float:
        return (end - start) / 1e6


class CudaEventClock:
    """CUDA events recorded on the current stream, as `triton.testing.do_bench` times: the L2 flush before each call
    keeps the GPU busy while the host enqueues the start event, the call's launches and the end event, so host launch
    latency is hidden and no synchronisation wake-up falls inside the measurement."""

    resolution_ms = 0.5e-3  # cudaEventElapsedTime: about half a microsecond

    def __init__(self, device: torch.device):
        self._sync: Callable[[], None] = torch._C._cuda_synchronize
        self._event = torch.cuda.Event
        self._record = torch.cuda.Event.record
        self._elapsed = torch.cuda.Event.elapsed_time
        self._flush_buf = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int32, device=device)
        self._zero = torch.Tensor.zero_
        self._reset_persisting_l2 = _persisting_l2_reset()

    def flush(self) -> None:
        self._reset_persisting_l2()  # lines pinned with an access-policy window survive an ordinary flush
        self._zero(self._flush_buf)

    def mark(self) -> Any:
        event = self._event(enable_timing=True)
        self._record(event)
        return event

    def sync(self) -> None:
        self._sync()

    def elapsed_ms(self, start: Any, end: Any) -> float:
        return float(self._elapsed(start, end))


CALIBRATION_REPS = 25
GRAIN_ELEMENTS = 32768  # PyTorch's grain: a CPU loop is split into chunks of at least this many elements
DEFAULT_LLC_BYTES = 32 * 2**20  # where sysfs says nothing


_prepared: torch.Tensor | None = None


# The largest eviction buffer a zygote writes ahead. Four caches of a VM that reports a 480 MiB last-level cache are
# 1.9 GB: 2.1 s of CPU in each of the two zygotes before a search's first result, and 3.8 GB of memory, for calls
# whose inputs reach 240 MiB, which no built-in task's do. Above it, the worker of such a task writes its own.
PREPARE_AHEAD_MAX_BYTES = 256 * 2**20


def prepare_cpu_flush() -> None:
    """Write the eviction buffer once, in the zygote before it forks: every worker then reads the same pages (copy on
    write, and nobody writes them) instead of faulting in its own at each evaluation (~50 ms at 128 MiB). Only up to
    `PREPARE_AHEAD_MAX_BYTES`. Filled without an OpenMP region: a zygote must not start OpenMP's pool before it
    forks."""
    global _prepared
    size_bytes = cpu_flush_bytes()
    _prepared = _evict_buffer(size_bytes) if size_bytes <= PREPARE_AHEAD_MAX_BYTES else None


def _prepared_buffer() -> torch.Tensor | None:
    """The zygote's eviction buffer, if it prepared one of this CPU's size."""
    return _prepared if _prepared is not None and _prepared.numel() * 4 == cpu_flush_bytes() else None


def _evict_buffer(size_bytes: int) -> torch.Tensor | None:
    if size_bytes <= 0:
        return None
    if _prepared is not None and _prepared.numel() * 4 == size_bytes:
        return _prepared
    return torch.frombuffer(bytearray(b"\x01") * size_bytes, dtype=torch.float32)  # real pages, not the zero page


def _llc_bytes(cache_dir: Path) -> int:
    """The largest cache sysfs reports for CPU 0 (the last level), or DEFAULT_LLC_BYTES where it says nothing."""
    sizes = cache_sizes_kib(cache_dir)
    return max(sizes.values()) * 1024 if sizes else DEFAULT_LLC_BYTES


def cpu_flush_bytes(cache_dir: Path = CACHE_DIR) -> int:
    """Four times the last-level cache this CPU reports (sysfs), read by every OpenMP thread in parallel: each thread
    then reads twice that cache, even where a virtual machine's CPUs sit on two last-level caches while sysfs names
    one (this machine's copies ran at cache speed up to 64 MiB with 32 MiB reported)."""
    return 4 * _llc_bytes(cache_dir)


# The most a CPU call's inputs may total and still be timed as a pipeline would find them, in cache. A virtual
# machine's sysfs reports its socket's whole last-level cache, which other tenants share: 480 MiB on one host this
# project ran on, where half of it would have left every built-in task's inputs warm. 16 MiB is about what two to
# eight cores hold of a current server's last-level cache.
COLD_FROM_MAX_BYTES = 16 * 2**20


def cpu_cold_from_bytes(cache_dir: Path = CACHE_DIR) -> int:
    """Half the last-level cache, at most `COLD_FROM_MAX_BYTES`: inputs smaller than that would be in cache in a real
    pipeline too (the operator that produced them just wrote them, and they fit beside an output of their own size).
    Larger inputs could not stay cached in a pipeline, yet drawing them leaves a cache's worth of them there: those
    calls are timed cold. (Until 2026-11-24 the bound was a core's L2, 1 MiB here; until 2026-11-25 half the
    last-level cache whatever its size; see docs/EVALUATOR.md, "Timing".)"""
    return min(_llc_bytes(cache_dir) // 2, COLD_FROM_MAX_BYTES)


class CallTimer:
    """One timed call, the same code on every device; only the clock differs (`HostClock`, `CudaEventClock`, or a
    recording fake in the tests). The empty call's median is calibrated once and subtracted from every call.

    After each call the timer also records how long the device kept working after the call's end mark (work left on
    another stream, which a mark on the current stream does not wait for): `left_running_ms`, a fact the driver judges.
    """

    def __init__(self, device: torch.device, clock: Any = None, cold_from_bytes: int | None = None,
                 flush: Callable[[list[Any]], int] | None = None):
        """`flush`: on a CPU, the harness library's line flush (`line_flush.LineFlush`), which evicts a cold call's
        own memory; without one, a cold call is evicted by reading a buffer of four last-level caches."""
        self.device = device
        kind = rules(device.type)
        self.cuda = not kind.host_timer  # the device's own events time its calls (CUDA's), not the host's clock
        if clock is None:
            clock = HostClock() if kind.host_timer else CudaEventClock(device)
        self.clock = clock
        self._evicts = kind.evicts_host_caches and isinstance(clock, HostClock)
        self._flush_lines = flush if self._evicts else None
        # Without a line flush, the eviction buffer: the zygote's where it prepared one (`prepare_cpu_flush`), else
        # written at the first call that needs it (a one-shot evaluation's zygotes skip it, and so does any zygote
        # of a CPU whose buffer is past `PREPARE_AHEAD_MAX_BYTES`).
        self._evict_buf = _prepared_buffer() if self._evicts and self._flush_lines is None else None
        self._read = torch.Tensor.max
        # Below the eviction's bound, a reduction over one value seen GRAIN_ELEMENTS times per thread (stride 0: it
        # reads one cache line) wakes every OpenMP thread right before the call, as the eviction's read does above it.
        self._pool_waker = None if not self._evicts else \
            torch.zeros(1).expand(GRAIN_ELEMENTS * max(2, torch.get_num_threads()))
        self._wake = torch.Tensor.max
        # The flush runs before calls whose tensor arguments total at least this: always on a GPU (do_bench's rule,
        # and a flush costs microseconds there); on a CPU only from half the last-level cache, where a real pipeline
        # could not keep the inputs cached either, since reading four last-level caches costs milliseconds a call.
        self.cold_from_bytes = (cpu_cold_from_bytes() if kind.evicts_host_caches else 0) if cold_from_bytes is None \
            else cold_from_bytes
        self._numel, self._element_size, self._tensor = torch.Tensor.numel, torch.Tensor.element_size, torch.Tensor
        self.overhead_ms = 0.0         # the empty call's median, end mark minus start mark
        self.settle_overhead_ms = 0.0  # the empty call's median, settled mark (after a device-wide sync) minus start
        self.left_running_ms = 0.0     # of the last call

    def sync(self) -> None:
        self.clock.sync()

    def args_bytes(self, args: list[Any]) -> int:
        return sum(self._numel(a) * self._element_size(a) for a in args if isinstance(a, self._tensor))

    def _raw(self, fn: Callable[..., Any], args: list[Any]) -> tuple[float, float, Any]:
        clock = self.clock
        if self.cold_from_bytes <= 0 or (args and self.args_bytes(args) >= self.cold_from_bytes):
            clock.flush()
        start = clock.mark()
        out = fn(*args)
        end = clock.mark()
        clock.sync()  # everything on the device, side streams included
        settled = clock.mark()
        clock.sync()
        return clock.elapsed_ms(start, end), clock.elapsed_ms(start, settled), out

    def calibrate(self, reps: int = CALIBRATION_REPS) -> float:
        """Time an empty call `reps` times; its median is what the timer itself costs. Returns it."""
        def empty() -> None:
            return None
        runs = [self._raw(empty, []) for _ in range(reps)]
        self.overhead_ms = statistics.median(r[0] for r in runs)
        self.settle_overhead_ms = statistics.median(r[1] for r in runs)
        return self.overhead_ms

    @property
    def flushes_lines(self) -> bool:
        """Whether cold calls are evicted line by line (`line_flush.py`) rather than by reading a buffer."""
        return self._flush_lines is not None

    def evicts(self, args: list[Any]) -> bool:
        """Whether `evict(args)` evicts: a CPU call whose inputs reach `cpu_cold_from_bytes`."""
        return self._pool_waker is not None and bool(args) and self.args_bytes(args) >= self.cold_from_bytes

    def evict(self, args: list[Any], leftovers: list[Any] | None = None) -> bool:
        """On a CPU, before a call whose inputs reach `cpu_cold_from_bytes`: push the inputs out of every cache level,
        so the call reads them from memory, not from the caches that drawing them just filled. With a line flush,
        their own lines go (about 1 ms for 31 MiB on 2 cores), and so do `leftovers`' (the tensors the draw made on
        the way, `TaskRuntime.inputs`' `made`): freed, a temporary's cached lines would be where the call's output
        lands, written in the cache instead of memory (docs/EVALUATOR.md, "Timing"). Without a line flush, every
        OpenMP thread reads the eviction buffer of four last-level caches. Runs no candidate code: the worker calls it
        before the profiler watches the call. Returns whether it evicted."""
        if not self.evicts(args):
            return False
        if self._flush_lines is not None:
            self._flush_lines(args + (leftovers or []))
            return True
        if self._evict_buf is None:
            self._evict_buf = _evict_buffer(cpu_flush_bytes())
        if self._evict_buf is None:
            return False
        self._read(self._evict_buf)
        return True

    def forget(self, values: list[Any]) -> None:
        """After a cold call, with a line flush: its outputs, the harness's copies of them and its inputs (which the
        call and the checks after it read back into the caches) flushed too, as the buffer's read evicted them, so
        that the next call writes to no line this one left cached."""
        if self._flush_lines is not None:
            self._flush_lines(values)

    def wake(self) -> None:
        """On a CPU, right before a call: wake every OpenMP thread of PyTorch's pool (about 0.05 ms, no memory read),
        so that a parallel call does not start by waiting for sleeping threads (passive waiting, `sandbox/launch.py`):
        without it, a 256x1024 eager ReLU's interquartile range was 40 times its median on a loaded machine, 0.2-0.6
        times with it. A PyTorch op of the harness's: the worker runs it before the profiler watches the call."""
        if self._pool_waker is not None:
            self._wake(self._pool_waker)

    def time_call(self, fn: Callable[..., Any], args: list[Any], evicted: bool = False) -> tuple[float, Any]:
        """Milliseconds of one call (the empty call's cost taken off), and its result. `evicted`: the caller has run
        `evict(args)` and `wake()` itself (outside the profiler's watch), and `forget`s the outputs after its copies
        of them; otherwise a cold call's outputs are forgotten here, right after the call."""
        cold = False
        if not evicted:
            cold = self.evict(args)
            self.wake()
        raw_ms, settled_ms, out = self._raw(fn, args)
        ms = max(raw_ms - self.overhead_ms, self.clock.resolution_ms)
        self.left_running_ms = max(0.0, (settled_ms - self.settle_overhead_ms) - ms)
        if cold:
            self.forget(_tensors_of(out) + list(args))
        return ms, out


def _tensors_of(out: Any) -> list[Any]:
    """A call's result as a list to flush: itself, or the items of exactly a tuple or list (a subclass's `__iter__`
    would run a candidate's code; `LineFlush` then takes exact tensors only)."""
    kind = type(out)
    return list.copy(out) if kind is list else [*tuple.__iter__(out)] if kind is tuple else [out]


def back_to_back(fn: Callable[..., Any], args: list[Any], timer: CallTimer, seconds: float) -> int:
    """Calls `fn(*args)` back to back for at least `seconds` after one warm call, synchronising only at the ends (the
    energy loop, energy.py); returns how many calls were counted."""
    fn(*args)
    timer.sync()
    calls, end_ms = 0, now_ms() + seconds * 1e3
    while now_ms() < end_ms:
        fn(*args)
        calls += 1
    timer.sync()
    return calls


def loaded_libcudart(maps_text: str) -> list[str]:
    """Paths of the CUDA runtime libraries mapped into a process, from its /proc/self/maps text (the one torch loaded
    comes first: a second runtime opened by name could be another version, with its own context state)."""
    seen: dict[str, None] = {}
    for line in maps_text.splitlines():
        path = line.split(maxsplit=5)[5] if len(line.split(maxsplit=5)) == 6 else ""
        if os.path.basename(path).startswith("libcudart") and ".so" in path:
            seen.setdefault(path.strip(), None)
    return list(seen)


def libcudart_candidates() -> list[str]:
    """Where to look for libcudart, best first: already loaded, torch's own lib folder, the nvidia-* wheels, the
    loader's search path."""
    import ctypes.util
    import glob
    try:
        with open("/proc/self/maps") as f:
            found = loaded_libcudart(f.read())
    except OSError:
        found = []
    torch_lib = os.path.join(os.path.dirname(torch.__file__), "lib")
    found += sorted(glob.glob(os.path.join(torch_lib, "libcudart*.so*")))
    found += sorted(glob.glob(os.path.join(os.path.dirname(os.path.dirname(torch_lib)), "nvidia", "*", "lib",
                                           "libcudart.so*")))
    by_loader = ctypes.util.find_library("cudart")
    return found + ([by_loader] if by_loader else []) + ["libcudart.so", "libcudart.so.13", "libcudart.so.12"]


def _persisting_l2_reset() -> Callable[[], None]:
    """cudaCtxResetPersistingL2Cache from the CUDA runtime that torch loaded, or a no-op where it cannot be found."""
    import ctypes
    for name in libcudart_candidates():
        try:
            fn = ctypes.CDLL(name).cudaCtxResetPersistingL2Cache
        except (OSError, AttributeError):
            continue
        return lambda: None if fn() == 0 else None
    return lambda: None


def relative_standard_error(samples_ms: list[float]) -> float:
    """The median's standard error over the median (`median_standard_error_ms`): the stopping rule for repetitions."""
    se_ms, med = median_standard_error_ms(samples_ms)
    return se_ms / med if med > 0 else math.inf


def timer_clock() -> object:
    """The builtin that CPU timings read (the zygote reports where it lies: `verify/timer_path.py`)."""
    return _now_ns


def timer_reference() -> int | None:
    """The address of this module's reference to its clock builtin: the value slot of `_now_ns` in the module's dict,
    which `HostClock.mark` reads at every mark (the zygote reports it: `verify/timer_path.py` compares the slot and its
    key in a worker with the zygote's). Read from CPython 3.11's dict layout (the keys object's pointer at 32 bytes
    into the dict; its entries after a 32-byte head and the index table; a str-keyed entry is a key and a value
    pointer) and checked by finding both pointers where they should be; None where the layout is another."""
    import ctypes  # the zygote's own code, before any candidate exists
    globals_ = globals()
    key = next((k for k in globals_ if k == "_now_ns"), None)
    if key is None or sys.implementation.name != "cpython" or sys.version_info[:2] != (3, 11):
        return None
    try:
        keys = ctypes.c_uint64.from_address(id(globals_) + 32).value
        log2_index_bytes, kind = ctypes.c_uint8.from_address(keys + 9).value, ctypes.c_uint8.from_address(keys + 10).value
        entries = ctypes.c_int64.from_address(keys + 24).value
        if kind != 1 or not 0 < entries < 1 << 16 or log2_index_bytes > 24:  # str keys only (DICT_KEYS_UNICODE)
            return None
        first = keys + 32 + (1 << log2_index_bytes)
        for i in range(entries):
            at = first + 16 * i
            if ctypes.c_uint64.from_address(at).value == id(key):
                return at + 8 if ctypes.c_uint64.from_address(at + 8).value == id(_now_ns) else None
    except (ValueError, OSError):
        return None
    return None


def now_ms() -> float:
    return _now_ns() / 1e6
