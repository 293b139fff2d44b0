"""The C library's heap of a process that times calls: every CPU worker of the evaluator (both sides alike, set by
`zygote.py` before the worker is hardened), and the benchmark scripts that time several sides in one process
(`scripts/bench_native.py`, `scripts/bench_seed_ab.py`: eager PyTorch, a native seed and a copy, call by call).

glibc hands an allocation of 32 MiB or more to the system afresh each time (mmap) and gives a freed heap top back once
it passes its trim threshold, so the next large output is fresh pages: one minor fault per 4 KiB page, about 1.5 us
each on a VM, 12 ms for a 31 MiB output, several times the memory's own time for it. In the evaluator each side runs in
a process of its own, where a kernel that allocates only its output reuses the same memory from its second call on;
in one process shared with eager PyTorch's temporaries, whether a seed's output faults depends on what eager freed
just before (measured: softmax_backward's seed took 4.5-6 ms in rounds without faults, 18 ms with its 7,874). A
worker is no exception: its fresh inputs of each timed call (drawn, scaled, the first copy freed), the outputs it
copies for the driver and its checks move the heap's top, so the timed call's 31 MiB output was fresh pages (7,936
faults, several times the call) in 2-7 of a side's 20-60 timed calls, a different number in every evaluation
(docs/PERFORMANCE-HISTORY.md, "Repeat-run noise"). Kept
heap (`keep_freed_memory`): nothing is mapped afresh nor trimmed, every side reuses freed memory as it would in steady
state, and the times are the kernels' and the memory's, as the stored copy bandwidth's are (`cpu_peaks`).

The processes that drive evaluations keep theirs too (`opforge eval`, `optimize`, `bench` and `worker`, and a Ray
evaluator actor): the driver receives each trial's outputs of both sides, and the timed calls' kept outputs, into
buffers of their size, which glibc's defaults made fresh pages every time. In one cold evaluation of a 31 MiB softmax
that was about 100,000 of the driver's faults (2-11 us each on a VM, docs/PERFORMANCE-HISTORY.md), on the path the
workers wait on. Such a process holds its heap's high-water mark until it exits.
"""

from __future__ import annotations

import ctypes
import resource
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

M_TRIM_THRESHOLD = -1  # mallopt parameters (malloc.h)
M_MMAP_MAX = -4
TRIM_NEVER_BYTES = 2**31 - 1  # the largest trim threshold mallopt takes (an int)


def keep_freed_memory() -> bool:
    """Make this process's C heap keep what it frees (no mmap per allocation, no trimming); False where the C library
    is not glibc or refused. Call before the timed sides allocate."""
    try:  # the symbols already loaded (no `find_library`, which runs a helper program: a worker calls this)
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError, TypeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_MMAP_MAX, 0)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_NEVER_BYTES))


def malloc_bytes(n: int) -> "torch.Tensor":
    """An uninitialised uint8 tensor of `n` bytes from the C library's plain `malloc`, freed when the last tensor on
    it goes; PyTorch's own where that C library cannot be reached.

    For buffers of a size that recurs, in a process that keeps its heap: PyTorch's CPU allocations are 64-byte aligned
    (`posix_memalign`), and glibc (before 2.38) serves such a request from a free chunk only if it holds the request,
    the alignment and a minimum chunk more. A block freed between two allocations of the same size is thus too small
    for the second wherever something else was allocated next to it, and every such allocation grew the heap by fresh
    pages (the driver's received 31 MiB outputs: 7,936 faults each, 2-11 us a fault on a VM). `malloc` reuses the
    block. Not numpy's `empty`, which would do the same but also advise huge pages for the range: memory whose page
    size then differs from the workers' (a native ReLU ran 20% faster there), which an in-process comparison in the
    same process would read as the kernel's speed."""
    import torch  # here: the commands import this module before torch loads (`keep_freed_memory`)
    if n <= 0 or _malloc is None or _free is None:
        return torch.empty(max(n, 0), dtype=torch.uint8)
    address = _malloc(n)
    if not address:
        raise MemoryError(f"malloc could not give {n} bytes")
    raw = (ctypes.c_uint8 * n).from_address(address)
    raw._freed_with = _Block(address)  # type: ignore[attr-defined]  # freed once no tensor holds the array
    return torch.frombuffer(raw, dtype=torch.uint8)


class _Block:
    """A `malloc`ed address, freed when the last reference goes."""

    __slots__ = ("address",)

    def __init__(self, address: int) -> None:
        self.address = address

    def __del__(self) -> None:
        if _free is not None:
            _free(self.address)


def minor_faults() -> int:
    """This process's minor page faults so far (all its threads)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


# Growth past the heap's free memory: a timed call's output and its copy. Its inputs and their draw's temporary land
# where the warm-up's were (drawn before the reserve runs, freed before the first timed call).
HEADROOM_PER_INPUT_BYTE = 2
RESERVE_PER_INPUT_BYTE = 16  # at most this many blocks of the inputs' size
RESERVE_CAP_BYTES = 512 * 2**20


def reserve(input_bytes: int) -> int:
    """Write, once, the kept heap's memory that a timed call's allocations of `input_bytes` can land in: blocks of that
    size, allocated until they cover the heap's free bytes and `HEADROOM_PER_INPUT_BYTE` times `input_bytes` of growth
    (at most `RESERVE_PER_INPUT_BYTE` blocks and `RESERVE_CAP_BYTES`), each written and all freed. A worker's heap
    holds free memory it inherited from its zygote (copy on write: a first write faults every page as a fresh one
    would); where a timed call's 31 MiB output landed in such memory, or grew the heap, the call faulted 7,936 pages,
    several times its own time. A worker that ran its correctness trials first holds free memory of its own too,
    written by the trials' draws and outputs (250-430 MiB for a 31 MiB softmax), where its timed calls land. Until
    2026-11-25 the growth was six blocks, most of which no timed call used: 186 MiB of fresh pages a side, 48,000-
    55,000 faults, 0.07-0.6 s a side on a VM whose fresh pages cost up to 11 us each (docs/PERFORMANCE-HISTORY.md); the
    timed calls of a cold evaluation faulted as little with none. It calls the C library's own functions, found when
    this module was imported (before any candidate code). Returns the bytes written (0 where the C library could not
    be reached). Written by the kernel where it can (`_populate`)."""
    if input_bytes <= 0 or _malloc is None or _free is None:
        return 0
    budget = min(_free_heap_bytes() + HEADROOM_PER_INPUT_BYTE * input_bytes, RESERVE_PER_INPUT_BYTE * input_bytes,
                 RESERVE_CAP_BYTES)
    blocks: list[int] = []
    try:
        while len(blocks) * input_bytes < budget:
            block = _malloc(input_bytes)
            if not block:
                break
            blocks.append(block)
            _populate(block, input_bytes)
    finally:
        for block in blocks:
            _free(block)
    return len(blocks) * input_bytes


MADV_POPULATE_WRITE = 23  # Linux 5.14 and later: fault pages in writable, as a write would, without writing them
PAGE_BYTES = 4096


def _populate(block: int, size_bytes: int) -> None:
    """Make every page of the block written memory of this process (a copy of an inherited page, or a fresh one): by
    the kernel in one call (madvise's MADV_POPULATE_WRITE, no trap per page: 261-275 ms instead of 420-471 for 496
    MiB in a forked child on a 2-CPU VM, 2026-11-25), else by writing it. The partial pages at either end are
    written."""
    start = -(-block // PAGE_BYTES) * PAGE_BYTES
    end = (block + size_bytes) // PAGE_BYTES * PAGE_BYTES
    if _madvise is None or end <= start or _madvise(start, end - start, MADV_POPULATE_WRITE) != 0:
        _memset(block, 0, size_bytes)
        return
    _memset(block, 0, start - block)
    _memset(end, 0, block + size_bytes - end)


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                     "fsmblks", "uordblks", "fordblks", "keepcost")]


def _free_heap_bytes() -> int:
    """The free bytes of the C heap's chunks (mallinfo2's fordblks), 0 where glibc has no mallinfo2 (before 2.33)."""
    if _mallinfo2 is None:
        return 0
    return int(_mallinfo2().fordblks)


def _libc_functions() -> tuple[Any, Any, Any, Any]:
    try:
        libc = ctypes.CDLL(None)
        malloc, free = libc.malloc, libc.free
    except (OSError, AttributeError, TypeError):
        return None, None, None, None
    malloc.argtypes, malloc.restype = [ctypes.c_size_t], ctypes.c_void_p
    free.argtypes, free.restype = [ctypes.c_void_p], None
    mallinfo2 = getattr(libc, "mallinfo2", None)
    if mallinfo2 is not None:
        mallinfo2.argtypes, mallinfo2.restype = [], _MallInfo2
    madvise = getattr(libc, "madvise", None)
    if madvise is not None:
        madvise.argtypes, madvise.restype = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int], ctypes.c_int
    return malloc, free, mallinfo2, madvise


_malloc, _free, _mallinfo2, _madvise = _libc_functions()
_memset = ctypes.memset
