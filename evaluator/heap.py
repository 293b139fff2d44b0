"""The C library's heap in a process that times several sides one after the other (`scripts/bench_native.py`,
`scripts/bench_seed_ab.py`: eager PyTorch, a native seed and a copy, call by call).

glibc hands an allocation of 32 MiB or more to the system afresh each time (mmap) and gives a freed heap top back once
it passes its trim threshold, so the next large output is fresh pages: one minor fault per 4 KiB page, about 1.5 us
each on a VM, 12 ms for a 31 MiB output, several times the memory's own time for it. In the evaluator each side runs in
a process of its own, where a kernel that allocates only its output reuses the same memory from its second call on;
in one process shared with eager PyTorch's temporaries, whether a seed's output faults depends on what eager freed
just before (measured: softmax_backward's seed took 4.5-6 ms in rounds without faults, 18 ms with its 7,874). Kept
heap (`keep_freed_memory`): nothing is mapped afresh nor trimmed, every side reuses freed memory as it would in steady
state, and the times are the kernels' and the memory's, as the stored copy bandwidth's are (`cpu_peaks`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import resource

M_TRIM_THRESHOLD = -1  # mallopt parameters (malloc.h)
M_MMAP_MAX = -4
TRIM_NEVER_BYTES = 2**31 - 1  # the largest trim threshold mallopt takes (an int)


def keep_freed_memory() -> bool:
    """Make this process's C heap keep what it frees (no mmap per allocation, no trimming); False where the C library
    is not glibc or refused. Call before the timed sides allocate."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_MMAP_MAX, 0)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_NEVER_BYTES))


def minor_faults() -> int:
    """This process's minor page faults so far (all its threads)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
