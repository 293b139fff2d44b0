"""Machine code the candidate's process rewrote, read by the driver from the kernel's account of its memory.

Native code in a candidate can make any page of its process writable (`mprotect`) and overwrite the first bytes of a
function with a jump to its own: the C library's `clock_gettime` behind the worker's timer (a clock that falls
behind during calls alone, `tests/cheats/native_clock_jump_lag_in_calls.py`), `malloc` or `recv` behind the harness's
steps after a call, PyTorch's or the interpreter's own functions. No signal, no symbol look-up and no Python object
shows it, and what the patched function then reports is bounded only by the driver's clock around each call, within
the harness's own allowed differences (`clock_checks.call_gap`: 10% of the call beyond a floor and noise).

What the kernel keeps cannot be rewritten from inside: a page of a file mapped for execution (a library's or the
interpreter's code) is shared with the file until the process writes to it; the first write makes it the process's
own copy, an anonymous page counted in that mapping's `Anonymous` in `/proc/<pid>/smaps`, and it stays so after the
bytes are put back and the page made read-only again (`Private_Dirty` would not do: a library loaded from a file on
tmpfs, as the harness's and the candidate's are, is dirty in the page cache without any write of the process's). An honest process never writes to code it mapped from a file (libraries with
text relocations, the one exception, are not built by the toolchains of these machines; the reference's worker,
which runs the same libraries, is read alike where a test needs it), so every executable file mapping must have no
page of its own and none may be writable. Code generated at run time (oneDNN's JIT kernels, a Triton kernel) lives in
anonymous memory and is not judged here.

`/proc/<pid>/smaps` of a worker that made itself undumpable (every candidate's worker: `hardening.py`) is readable
only with CAP_SYS_PTRACE: a driver running as root (CI, a worker machine's service) reads it; another reads nothing,
and the check is skipped (on a CPU the driver's clock checks still bound such a timer, as before). A candidate that puts a clean copy of the page back in
place (`mmap` of the file with `MAP_FIXED` after each call) between the driver's reads is not caught by this check
alone: the driver reads the map after the candidate's timing (see `docs/EVALUATOR.md`, class 7).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from evaluator.driver.connection import Refused
from evaluator.result import Status

_HEADER = re.compile(r"^([0-9a-f]+)-([0-9a-f]+) (\S{4}) [0-9a-f]+ \S+ (\d+)\s*(.*)$")


@dataclass(frozen=True)
class WrittenCode:
    """An executable mapping of a file that the process changed: its path, the KiB of its own (copied-on-write)
    pages in it, and whether it is writable now."""
    path: str
    dirty_kib: int
    writable: bool


def written_code(smaps_text: str) -> list[WrittenCode]:
    """Every executable file mapping with pages of the process's own, or mapped writable, in an smaps text."""
    mappings: list[list] = []  # [path, writable, dirty KiB] of each executable file mapping
    current: list | None = None
    for line in smaps_text.splitlines():
        header = _HEADER.match(line)
        if header:
            perms, inode, path = header.group(3), int(header.group(4)), header.group(5).strip()
            current = [path or "?", perms[1] == "w", 0] if perms[2] == "x" and inode != 0 else None
            if current is not None:
                mappings.append(current)
        elif current is not None and line.startswith("Anonymous:"):
            current[2] = int(line.split()[1])
    return [WrittenCode(path, kib, writable) for path, writable, kib in mappings if writable or kib]


def read_written_code(pid: int) -> list[WrittenCode] | None:
    """`written_code` of a live process; None where its map cannot be read (a driver without CAP_SYS_PTRACE reading
    an undumpable worker, or a process that ended)."""
    try:
        with open(f"/proc/{pid}/smaps", encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    return written_code(text) if text else None


def refuse_written_code(pid: int | None) -> bool:
    """Refuse a candidate whose process rewrote machine code mapped from a file; False where it could not be read."""
    if pid is None:
        return False
    written = read_written_code(pid)
    if written is None:
        return False
    if written:
        names = ", ".join(f"{w.path.rsplit('/', 1)[-1]} ({w.dirty_kib} KiB{', writable' if w.writable else ''})"
                          for w in written[:3])
        raise Refused(Status.REJECTED,
                      f"the candidate's process rewrote machine code of its libraries ({names}): native code that "
                      "patches the harness's or a library's functions (a timer's clock, an allocator) is refused")
    return True
