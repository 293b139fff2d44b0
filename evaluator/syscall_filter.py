"""A seccomp filter that keeps every process a candidate's worker starts inside the worker's own process tree.

`clone(CLONE_PARENT)` makes the new process a child of the caller's parent: a worker's sibling, the zygote's child.
Such a process is outside every count of the worker: its threads and children (the worker's own checks), its CPU by
the kernel's accounting (the driver's, `worker_cpu.py`); with CLONE_VM it shares the worker's memory. One that spun
while the reference was timed slowed it by a fifth and passed
(`tests/cheats/native_sibling_busy_while_reference_runs.py`).
The filter kills the process that calls `clone` with CLONE_PARENT (nothing honest asks for it; a refused call would
leave the candidate running as if honest, and its verdict would say nothing: now it dies, and the evaluation says
so), and answers ENOSYS to `clone3`, whose flags lie in memory that a filter cannot read (glibc then falls back to
`clone` for its threads and forks, as it does on kernels without `clone3`).
Syscalls of another ABI than the process's own (x32, or i386 through `int 0x80` on x86-64) get ENOSYS too: their
numbers differ, and nothing the harness runs uses them. Inherited by every thread started afterwards and every child.
"""

from __future__ import annotations

import ctypes
import errno
import platform
import struct

PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
CLONE_PARENT = 0x00008000
_X32_BIT = 0x40000000
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_RET_KILL_PROCESS = 0x80000000
_LD_ABS_W, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
# machine -> (the kernel's audit architecture, clone's number, clone3's number)
_ARCHES = {"x86_64": (0xC000003E, 56, 435), "aarch64": (0xC00000B7, 220, 435)}


def program(machine: str) -> list[tuple[int, int, int, int]] | None:
    """The filter's classic BPF instructions (code, jump if true, jump if false, k) for `machine`; None where the
    machine is not one whose numbers are known here."""
    if machine not in _ARCHES:
        return None
    arch, clone, clone3 = _ARCHES[machine]
    return [
        (_LD_ABS_W, 0, 0, 4),          # 0: the syscall's architecture
        (_JEQ, 0, 8, arch),            # 1: another ABI -> 10
        (_LD_ABS_W, 0, 0, 0),          # 2: its number
        (_JGE, 6, 0, _X32_BIT),        # 3: x32 -> 10
        (_JEQ, 5, 0, clone3),          # 4: clone3 -> 10
        (_JEQ, 0, 2, clone),           # 5: not clone -> 8
        (_LD_ABS_W, 0, 0, 16),         # 6: clone's flags (the low word of its first argument; little-endian)
        (_JSET, 1, 0, CLONE_PARENT),   # 7: CLONE_PARENT -> 9
        (_RET, 0, 0, _RET_ALLOW),      # 8
        (_RET, 0, 0, _RET_KILL_PROCESS),          # 9
        (_RET, 0, 0, _RET_ERRNO | errno.ENOSYS),  # 10
    ]


def keep_processes_in_tree() -> bool:
    """Install the filter in this process (no new privileges first, as an unprivileged filter requires); False
    where the machine's numbers are unknown or the kernel refuses."""
    instructions = program(platform.machine())
    if instructions is None:
        return False
    code = b"".join(struct.pack("=HBBI", *ins) for ins in instructions)
    buffer = ctypes.create_string_buffer(code, len(code))

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = Program(len(instructions), ctypes.addressof(buffer))
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return False
        return libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) == 0
    except (OSError, AttributeError):
        return False
