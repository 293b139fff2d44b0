"""A seccomp filter for candidate workers: every process a worker starts stays inside its tree, and the worker acts on
no other process (signals, scheduling, limits).

`clone(CLONE_PARENT)` makes the new process a child of the caller's parent: a worker's sibling, the zygote's child.
Such a process is outside every count of the worker: its threads and children (the worker's own checks), its CPU by
the kernel's accounting (the driver's, `worker_cpu.py`); with CLONE_VM it shares the worker's memory. One that spun
while the reference was timed slowed it by a fifth and passed
(`tests/cheats/native_sibling_busy_while_reference_runs.py`). The filter kills the process that calls `clone` with
CLONE_PARENT (nothing honest asks for it; a refused call would leave the candidate running as if honest, and its
verdict would say nothing: now it dies, and the evaluation says so), and answers ENOSYS to `clone3`, whose flags lie
in memory that a filter cannot read (glibc then falls back to `clone` for its threads and forks, as it does on kernels
without `clone3`).

Without bubblewrap's PID namespace (the process sandbox) the reference's worker is visible and runs as the same
user, and the kernel lets a process signal another of its user's, and (as another user than root, after the
sandbox's own steps) re-prioritise, pin or limit it: native code that stopped the reference's worker (SIGSTOP, then
SIGCONT, a millisecond each) while the reference was timed passed at 8.7-9.5x for a kernel at 5.3-6.2x
(`tests/cheats/native_stop_reference.py`). A signal (`kill`, `tgkill`, `rt_sigqueueinfo`, `rt_tgsigqueueinfo`, or
`pidfd_open` for `pidfd_send_signal`) may name only the worker itself (its pid, written into the filter when it is
installed, or 0: "the caller"; for `kill` also its own process group, which it leads): naming another process kills
the worker, as CLONE_PARENT does (nothing honest signals another process). `tkill`, which names a thread alone,
answers EPERM (glibc signals threads with `tgkill`), and so does making another process the owner of a descriptor,
whose SIGIO (or the signal `F_SETSIG` picks, SIGSTOP included) the kernel would send it: `fcntl(F_SETOWN)` naming
another, `fcntl(F_SETOWN_EX)`, `ioctl(FIOSETOWN)` and `ioctl(SIOCSPGRP)`, whose owner a filter cannot read. Scheduling and
limits (`sched_setaffinity`, `sched_setparam`, `sched_setscheduler`, `sched_setattr`, `prlimit64`, `setpriority`,
`ioprio_set`) of another process answer EPERM:
an honest kernel may try to pin its own threads, named by their thread ids, which the filter cannot tell from
another process's; it then runs unpinned.
Nothing outside the evaluation is reachable through a socket or an IPC object: `socket()` makes network sockets only
(AF_INET, AF_INET6: the worker's network namespace has no interface), never a Unix socket, so the PostgreSQL or
MariaDB socket file of the machine, reachable by path whatever the namespaces, stays shut (the channel to the driver
is a descriptor the worker inherits); System V IPC and POSIX message queues answer EPERM (an object made in one
evaluation would outlive it and be found by the next), io_uring ENOSYS (its operations bypass this filter). The same
filter confines the build stage's compilers without bubblewrap (`build_jail.py`).
In the candidate's worker, once its device is warm and before the candidate is imported, a handler for a fault or
trap signal (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP) cannot be set (EPERM; reading one is allowed), and
`userfaultfd` answers EPERM: either runs the candidate's code whenever a page or an instruction it arranged is
reached, the harness's own steps after a call's end mark included (`tests/cheats/native_output_pages_fault_fill.py`,
`native_int3_libc_hook_after_timer.py`).
The memory conditions are the harness's: `prctl(PR_SET_THP_DISABLE)` answers EPERM, so native code cannot turn
transparent huge pages back on for its own process (the zygote turned them off before the filter: both sides' timed
memory is 4 KiB pages, `memory_conditions.py`; 2 MiB pages made a memory-bound kernel 7-10% faster).
Syscalls of another ABI than the process's own (x32, or i386 through `int 0x80` on x86-64) get ENOSYS: their numbers
differ, and nothing the harness runs uses them. Inherited by every thread started afterwards and every child.
"""

from __future__ import annotations

import ctypes
import errno
import os
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
_ARG0, _ARG1, _ARG2 = 16, 24, 32  # offsets of the low words of a syscall's first three arguments (little-endian)
# machine -> the kernel's audit architecture and the numbers of the syscalls the filter looks at
_ARCHES: dict[str, dict[str, int]] = {
    "x86_64": {"arch": 0xC000003E, "clone": 56, "clone3": 435, "kill": 62, "tkill": 200, "tgkill": 234,
               "rt_sigqueueinfo": 129, "rt_tgsigqueueinfo": 297, "pidfd_open": 434, "sched_setaffinity": 203,
               "sched_setparam": 142, "sched_setscheduler": 144, "sched_setattr": 314, "prlimit64": 302,
               "setpriority": 141, "ioprio_set": 251, "fcntl": 72, "ioctl": 16, "socket": 41, "socketpair": 53,
               "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
               "shmget": 29, "shmat": 30, "shmctl": 31, "shmdt": 67, "semget": 64, "semop": 65, "semctl": 66,
               "semtimedop": 220, "msgget": 68, "msgsnd": 69, "msgrcv": 70, "msgctl": 71, "mq_open": 240,
               "mq_unlink": 241, "mq_timedsend": 242, "mq_timedreceive": 243, "mq_notify": 244, "mq_getsetattr": 245,
               "prctl": 157, "rt_sigaction": 13, "userfaultfd": 323},
    "aarch64": {"arch": 0xC00000B7, "clone": 220, "clone3": 435, "kill": 129, "tkill": 130, "tgkill": 131,
                "rt_sigqueueinfo": 138, "rt_tgsigqueueinfo": 240, "pidfd_open": 434, "sched_setaffinity": 122,
                "sched_setparam": 118, "sched_setscheduler": 119, "sched_setattr": 274, "prlimit64": 261,
                "setpriority": 140, "ioprio_set": 30, "fcntl": 25, "ioctl": 29, "socket": 198, "socketpair": 199,
                "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
                "shmget": 194, "shmctl": 195, "shmat": 196, "shmdt": 197, "semget": 190, "semctl": 191,
                "semtimedop": 192, "semop": 193, "msgget": 186, "msgctl": 187, "msgrcv": 188, "msgsnd": 189,
                "mq_open": 180, "mq_unlink": 181, "mq_timedsend": 182, "mq_timedreceive": 183, "mq_notify": 184,
                "mq_getsetattr": 185, "prctl": 167, "rt_sigaction": 134, "userfaultfd": 282},
}
# Syscalls whose first argument is a process (0: the caller): signals, then scheduling and limits.
_SIGNALS = ("tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "pidfd_open")
_SCHEDULING = ("sched_setaffinity", "sched_setparam", "sched_setscheduler", "sched_setattr", "prlimit64")
# System V IPC and POSIX message queues: objects that outlive the process and that any process of the user (the next
# evaluation's included) finds by key, id or name; io_uring, whose queued operations (a socket, a connect) no seccomp
# filter sees. Nothing the harness or an honest kernel runs needs them: they answer EPERM (io_uring ENOSYS, as on a
# kernel built without it, so that a library falls back to plain calls).
_IPC = ("shmget", "shmat", "shmctl", "shmdt", "semget", "semop", "semctl", "semtimedop", "msgget", "msgsnd", "msgrcv",
        "msgctl", "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr")
_IO_URING = ("io_uring_setup", "io_uring_enter", "io_uring_register")
# socket(): the network families only (in a network namespace without interfaces: nothing to reach). AF_UNIX would
# reach every service listening on a socket file (PostgreSQL, MariaDB, Redis, the container runtime) and, outside a
# network namespace, abstract ones; the other families (netlink, packet, vsock, ...) reach the kernel or the host.
# socketpair(): AF_UNIX only, a connected pair that reaches nothing else.
AF_UNIX, AF_INET, AF_INET6 = 1, 2, 10
PRIO_PROCESS, IOPRIO_WHO_PROCESS = 0, 1
F_SETOWN, F_SETOWN_EX, FIOSETOWN, SIOCSPGRP = 8, 15, 0x8901, 0x8902  # who gets a descriptor's SIGIO (its signal)
PR_SET_THP_DISABLE = 41  # the memory conditions' 4 KiB pages (memory_conditions.py), set before the filter
# SIGILL, SIGTRAP, SIGBUS, SIGFPE, SIGSEGV: a handler for one of them runs code when the candidate's own code, or code
# it patched (an int3 over the C library's clock_gettime, an output's pages left PROT_NONE), faults or traps, at any
# point the harness reaches after a call's end mark: work done there is off the timer. Nothing honest in a kernel
# handles them (a guard page without a handler still just crashes, as it should).
_FAULT_SIGNALS = (4, 5, 7, 8, 11)


class _Program:
    """Classic BPF with labels: (code, true label or None, false label or None, k) until `assemble`."""

    def __init__(self) -> None:
        self.lines: list[tuple[int, str | None, str | None, int]] = []
        self.labels: dict[str, int] = {}

    def label(self, name: str) -> None:
        self.labels[name] = len(self.lines)

    def load(self, offset: int) -> None:
        self.lines.append((_LD_ABS_W, None, None, offset))

    def jump(self, code: int, k: int, yes: str | None = None, no: str | None = None) -> None:
        self.lines.append((code, yes, no, k))

    def ret(self, k: int) -> None:
        self.lines.append((_RET, None, None, k))

    def assemble(self) -> list[tuple[int, int, int, int]]:
        out = []
        for i, (code, yes, no, k) in enumerate(self.lines):
            def offset(name: str | None) -> int:
                jump = 0 if name is None else self.labels[name] - i - 1
                assert 0 <= jump < 256, name  # forward only, within a byte
                return jump
            out.append((code, offset(yes), offset(no), k))
        return out


def program(machine: str, own_pid: int, processes: bool = True, reach: bool = False,
            handlers: bool = False) -> list[tuple[int, int, int, int]] | None:
    """The filter's instructions (code, jump if true, jump if false, k) for `machine` and a process `own_pid`; None
    where the machine is not one whose numbers are known here. `processes`: the rules on clone, signals, scheduling
    and limits; `reach`: those on sockets, IPC and io_uring (a GPU worker installs them as a second filter once its
    device is warm: the CUDA driver may want a Unix socket of its own while it starts); `handlers`: no new handler
    for a fault or trap signal, no userfaultfd (the candidate's worker, installed with `reach`)."""
    nr = _ARCHES.get(machine)
    if nr is None:
        return None
    me, group = own_pid & 0xFFFFFFFF, -own_pid & 0xFFFFFFFF
    p = _Program()
    p.load(4)
    p.jump(_JEQ, nr["arch"], no="nosys")
    p.load(0)
    p.jump(_JGE, _X32_BIT, yes="nosys")
    if processes:
        p.jump(_JEQ, nr["clone3"], yes="nosys")
        p.jump(_JEQ, nr["clone"], yes="clone")
        p.jump(_JEQ, nr["tkill"], yes="deny")
        p.jump(_JEQ, nr["kill"], yes="kill")
        p.jump(_JEQ, nr["setpriority"], yes="who")
        p.jump(_JEQ, nr["ioprio_set"], yes="io_who")
        p.jump(_JEQ, nr["fcntl"], yes="fcntl")
        p.jump(_JEQ, nr["ioctl"], yes="ioctl")
        p.jump(_JEQ, nr["prctl"], yes="prctl")
        for name in _SIGNALS:
            p.jump(_JEQ, nr[name], yes="signal")
        for name in _SCHEDULING:
            p.jump(_JEQ, nr[name], yes="first")
    if reach:
        p.jump(_JEQ, nr["socket"], yes="socket")
        p.jump(_JEQ, nr["socketpair"], yes="socketpair")
        for name in _IPC:
            p.jump(_JEQ, nr[name], yes="deny")
        for name in _IO_URING:
            p.jump(_JEQ, nr[name], yes="nosys")
    if handlers:
        p.jump(_JEQ, nr["rt_sigaction"], yes="sigaction")
        p.jump(_JEQ, nr["userfaultfd"], yes="deny")
    p.ret(_RET_ALLOW)
    p.label("clone")
    p.load(_ARG0)
    p.jump(_JSET, CLONE_PARENT, yes="kill_process")
    p.ret(_RET_ALLOW)
    p.label("kill")  # kill(pid): itself, its group (-pid: it leads it) or 0 (its group)
    p.load(_ARG0)
    p.jump(_JEQ, group, yes="allow")  # else on to the check of a single process
    p.label("signal")  # a signal's first argument: itself or 0, else the process dies
    p.load(_ARG0)
    p.jump(_JEQ, 0, yes="allow")
    p.jump(_JEQ, me, yes="allow", no="kill_process")
    p.label("first")  # the first argument: itself or 0
    p.load(_ARG0)
    p.jump(_JEQ, 0, yes="allow")
    p.jump(_JEQ, me, yes="allow", no="deny")
    p.label("who")  # setpriority(which, who, ...): PRIO_PROCESS, itself or 0
    p.load(_ARG0)
    p.jump(_JEQ, PRIO_PROCESS, yes="second", no="deny")
    p.label("io_who")  # ioprio_set(which, who, ...): IOPRIO_WHO_PROCESS, itself or 0
    p.load(_ARG0)
    p.jump(_JEQ, IOPRIO_WHO_PROCESS, no="deny")
    p.label("second")
    p.load(_ARG1)
    p.jump(_JEQ, 0, yes="allow")
    p.jump(_JEQ, me, yes="allow", no="deny")
    p.label("fcntl")  # fcntl(fd, F_SETOWN, pid): itself, its group or 0; F_SETOWN_EX's owner lies in memory
    p.load(_ARG1)
    p.jump(_JEQ, F_SETOWN_EX, yes="deny")
    p.jump(_JEQ, F_SETOWN, no="allow")
    p.load(_ARG2)
    p.jump(_JEQ, group, yes="allow")
    p.jump(_JEQ, 0, yes="allow")
    p.jump(_JEQ, me, yes="allow", no="deny")
    p.label("ioctl")  # the same owner set through ioctl: its argument lies in memory
    p.load(_ARG1)
    p.jump(_JEQ, FIOSETOWN, yes="deny")
    p.jump(_JEQ, SIOCSPGRP, yes="deny", no="allow")
    p.label("prctl")  # prctl(PR_SET_THP_DISABLE, ...): the worker's page backing is the harness's, not the kernel's
    p.load(_ARG0)
    p.jump(_JEQ, PR_SET_THP_DISABLE, yes="deny", no="allow")
    p.label("sigaction")  # rt_sigaction(sig, act, ...): a fault or trap signal only read (act NULL), never set
    p.load(_ARG0)
    for sig in _FAULT_SIGNALS:
        p.jump(_JEQ, sig, yes="sigaction_act")
    p.ret(_RET_ALLOW)
    p.label("sigaction_act")
    p.load(_ARG1)
    p.jump(_JEQ, 0, no="deny")
    p.load(_ARG1 + 4)
    p.jump(_JEQ, 0, yes="allow", no="deny")
    p.label("socket")  # socket(family, ...): AF_INET or AF_INET6
    p.load(_ARG0)
    p.jump(_JEQ, AF_INET, yes="allow")
    p.jump(_JEQ, AF_INET6, yes="allow", no="deny")
    p.label("socketpair")  # socketpair(family, ...): AF_UNIX
    p.load(_ARG0)
    p.jump(_JEQ, AF_UNIX, yes="allow", no="deny")
    p.label("allow")
    p.ret(_RET_ALLOW)
    p.label("deny")
    p.ret(_RET_ERRNO | errno.EPERM)
    p.label("kill_process")
    p.ret(_RET_KILL_PROCESS)
    p.label("nosys")
    p.ret(_RET_ERRNO | errno.ENOSYS)
    return p.assemble()


def install(processes: bool = True, reach: bool = False, handlers: bool = False) -> bool:
    """Install the filter (`program`'s rules chosen by `processes` and `reach`) in this thread and what it starts,
    for this process's pid now (no new privileges first, as an unprivileged filter requires); False where the
    machine's numbers are unknown or the kernel refuses. Filters stack: a second call adds rules."""
    instructions = program(platform.machine(), os.getpid(), processes, reach, handlers)
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
