"""Processes a worker leaves behind: found through /proc and killed, whatever session or group they moved to.

Each worker and the zygote are child subreapers, so a grandchild that double-forks and calls setsid() is re-parented
to its worker (or, once the worker is gone, to the zygote) instead of escaping; killing a worker kills its whole tree.
"""

from __future__ import annotations

import ctypes
import os
import signal
from collections.abc import Callable

PR_SET_CHILD_SUBREAPER = 36


def set_subreaper() -> bool:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _parents() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, state) for every visible process."""
    out: dict[int, tuple[int, str]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read().decode("ascii", "replace")
        except OSError:
            continue
        rest = stat[stat.rfind(")") + 2:].split()
        if len(rest) >= 2:
            out[int(name)] = (int(rest[1]), rest[0])
    return out


def live_children(pid: int) -> list[int]:
    """Children of pid that are not zombies. Read from each of its threads' `children` list where the kernel keeps
    one (a few small reads, after every call of a candidate), else from a scan of every process."""
    try:
        kids = []
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                kids += [int(k) for k in f.read().split()]
    except (OSError, ValueError):
        return [p for p, (ppid, state) in _parents().items() if ppid == pid and state not in ("Z", "X")]
    return [k for k in kids if _state(k) not in ("Z", "X", None)]


def _state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode("ascii", "replace")
    except OSError:
        return None  # gone
    return stat[stat.rfind(")") + 2:].split(" ", 1)[0]


def descendants(pid: int) -> list[int]:
    table = _parents()
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        for p, (ppid, state) in table.items():
            if ppid == parent and state not in ("Z", "X"):
                found.append(p)
                frontier.append(p)
    return found


def kill_tree(pid: int, include_root: bool = True) -> None:
    """SIGKILL every descendant of pid (repeated until none is left alive), then pid's group and pid itself."""
    for _ in range(20):
        alive = descendants(pid)
        if not alive:
            break
        for p in alive:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
    if include_root:
        for kill in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
            try:
                kill()
            except (ProcessLookupError, PermissionError):
                pass


PR_SET_DUMPABLE = 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522


def set_undumpable(dumpable: bool = False) -> bool:
    """Make this process's /proc entries (environ, mem, ...) unreadable to processes without CAP_SYS_PTRACE (or,
    with `dumpable`, readable again: a fresh worker must write its own /proc/self/uid_map)."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, int(dumpable), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def drop_capabilities() -> bool:
    """Clear every capability of this process (a root worker then cannot read other processes' secrets)."""

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        for cap in range(64):
            libc.prctl(24, cap, 0, 0, 0)  # PR_CAPBSET_DROP: nothing exec'd later regains it
        return libc.capset(ctypes.byref(Header(_LINUX_CAPABILITY_VERSION_3, 0)), (Data * 2)()) == 0
    except (OSError, AttributeError):
        return False


_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000
_CLONE_NEWIPC = 0x08000000


def isolate_network() -> bool:
    """Move this process into a network namespace of its own (no interfaces up: no network, no loopback, and no
    abstract Unix socket of the machine) and an IPC namespace of its own (no System V object or POSIX message queue
    of anyone else's, and none of its own outlives it).

    Bubblewrap does this already; this covers the process sandbox. As root a new network namespace is enough; as
    another user it takes a user namespace too, mapping the user to itself so file access is unchanged. Must run
    while the process has one thread (right after fork). Returns False where the kernel refuses.
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        # the IPC namespace where the kernel allows it (the seccomp filter refuses IPC calls either way)
        if libc.unshare(_CLONE_NEWNET | _CLONE_NEWIPC) == 0 or libc.unshare(_CLONE_NEWNET) == 0:
            return True
        uid, gid = os.getuid(), os.getgid()
        if (libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNET | _CLONE_NEWIPC) != 0
                and libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNET) != 0):
            return False
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
            with open(f"/proc/self/{name}", "w") as f:
                f.write(text)
        return True
    except (OSError, AttributeError):
        return False


def os_thread_count(listdir: Callable[[str], list[str]] = os.listdir) -> int:
    """This process's OS threads (/proc/self/task): native code's threads included, which Python's count misses."""
    try:
        return len(listdir("/proc/self/task"))
    except OSError:
        return 0


def spare_threads(threads: int) -> int:
    """The threads beyond the first count a candidate may keep, where both sides get `threads` (OMP_NUM_THREADS):
    the reference computes on its calling thread and `threads - 1` of OpenMP's pool, so a pool of the candidate's own
    beside its calling thread may hold as many. More can only add threads computing at once."""
    return max(0, threads - 1)


def warm_thread_pools() -> None:
    """Start the threads every worker has once it has run anything, before they are counted: OpenMP's pool (an ATen
    reduction above its grain size runs in parallel). The call observer starts no thread (the profiler's CPU-only
    state, `observer.py`); Kineto's profiler, which did (2.9 ms a worker to start it here), runs only in the profile
    command, after the last check of the candidate's threads."""
    import torch
    torch.ones(1 << 20).sum()
