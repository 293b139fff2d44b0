"""The memory conditions every timed CPU call runs under, the same for both sides, whichever worker and whichever
evaluation of a run: set once in each zygote before it imports torch (`zygote.serve`), inherited by every worker it
forks, and stated in each CPU verdict (`DeviceInfo.memory`) and in docs/EVALUATOR.md ("The memory a timed call
runs in").

- **4 KiB pages.** Transparent huge pages are off for the whole process (`prctl(PR_SET_THP_DISABLE)`): inputs,
  outputs, the kernel's scratch and the eviction buffer are all backed by 4 KiB pages, whatever the host's
  `/sys/kernel/mm/transparent_hugepage/enabled` says and whatever a library advises (numpy advises huge pages for
  its arrays of 4 MiB or more; PyTorch does where `THP_MEM_ALLOC_ENABLE` is set). Left to the host, the backing was
  a matter of chance: with `always` a page range gets a 2 MiB page only where an aligned 2 MiB of it is faulted in
  at once and the kernel finds a free one, memory a worker inherits from its zygote is split back to 4 KiB pages at
  its first write (copy on write), and khugepaged merges pages in the background at its own pace. A memory-bound
  kernel's time depends on the backing (a numpy-drawn input, with huge pages, measured 5-10% faster than a
  torch-drawn one for the same seed in one process on a Zen 5 host), so the same kernel read differently from one
  evaluation to the next. 4 KiB is the one backing every host gives every time, and PyTorch's own default on hosts
  that set `madvise` (most distributions).
- **A kept C heap** (`heap.keep_freed_memory`): no allocation is mapped afresh and nothing freed is trimmed, so a
  call's output reuses memory the worker wrote before instead of faulting in fresh pages in some calls and not
  others; the heap is written ahead once (`heap.reserve`) before the first timed call.
- **First touch and alignment.** Each timed call's inputs are drawn fresh and written by the drawing threads (the
  harness's OpenMP draw, `fast_draws.py`), outputs land in the kept heap; tensors are PyTorch's 64-byte-aligned CPU
  allocations on both sides.

A candidate's native code cannot undo the first condition in its own process: the candidate worker's seccomp
filter answers `prctl(PR_SET_THP_DISABLE)` with EPERM (`syscall_filter.py`), and `madvise(MADV_HUGEPAGE)` or
`MADV_COLLAPSE` get no huge page in a process with them off. The reference's process keeps it too.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path

PR_SET_THP_DISABLE = 41  # Linux 3.15 and later; inherited by fork, kept across execve
PR_GET_THP_DISABLE = 42
THP_DIR = Path("/sys/kernel/mm/transparent_hugepage")
ALIGNMENT_BYTES = 64  # PyTorch's CPU allocator (c10 `gAlignment`)


@dataclass(frozen=True, slots=True)
class MemoryConditions:
    """What a process that times calls set for its memory (`apply`), and the host's own huge-page settings."""

    small_pages: bool   # transparent huge pages off for this process: every page 4 KiB
    kept_heap: bool     # the C heap keeps what it frees (heap.keep_freed_memory)
    host_thp: str       # the host's transparent_hugepage/enabled setting ("always", "madvise", "never", "unknown")

    @property
    def text(self) -> str:
        """The conditions in words, as a verdict's `DeviceInfo.memory` states them."""
        pages = "4 KiB pages (transparent huge pages off)" if self.small_pages \
            else f"the host's page backing (transparent huge pages: {self.host_thp})"
        heap = "C heap kept (no fresh mappings, no trimming; written ahead)" if self.kept_heap \
            else "C heap at the C library's defaults"
        return f"{pages}; {heap}; inputs drawn fresh each call; {ALIGNMENT_BYTES}-byte aligned tensors"


def host_thp_setting(thp_dir: Path = THP_DIR) -> str:
    """The bracketed choice of the host's `transparent_hugepage/enabled` ("always [madvise] never" -> "madvise")."""
    try:
        text = (thp_dir / "enabled").read_text()
    except OSError:
        return "unknown"
    start, end = text.find("["), text.find("]")
    return text[start + 1:end] if 0 <= start < end else "unknown"


def _prctl(option: int, arg: int = 0) -> int:
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return -1
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    return int(prctl(option, arg, 0, 0, 0))


def small_pages_set() -> bool:
    """Whether transparent huge pages are off for this process (set here or inherited)."""
    return _prctl(PR_GET_THP_DISABLE) == 1


def small_pages() -> bool:
    """Turn transparent huge pages off for this process and every process it forks from now on; False where the
    kernel or C library refused (before Linux 3.15, or not Linux)."""
    return _prctl(PR_SET_THP_DISABLE, 1) == 0 and small_pages_set()


def apply() -> MemoryConditions:
    """Set the memory conditions of a process that times CPU calls (both zygotes, and the scripts that time sides in
    one process), before it allocates what it times; returns what took."""
    from evaluator.worker.heap import keep_freed_memory
    return MemoryConditions(small_pages(), keep_freed_memory(), host_thp_setting())


def expected(thp_dir: Path = THP_DIR) -> MemoryConditions:
    """The conditions the workers run under, as the driver states them in a verdict: this process's own check that
    the kernel takes the setting (the zygotes set it the same way), read without changing this process."""
    try:
        glibc = hasattr(ctypes.CDLL(None), "mallopt")
    except OSError:
        glibc = False
    return MemoryConditions(_prctl(PR_GET_THP_DISABLE) in (0, 1), glibc, host_thp_setting(thp_dir))
