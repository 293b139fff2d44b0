"""The candidate worker's seccomp filter (`evaluator/sandbox/syscall_filter.py`): threads, forks, signals to itself and
PyTorch's thread pool work under it, `clone3` says it does not exist, `clone(CLONE_PARENT)` (a sibling outside the
worker's tree) and a signal to another process kill, and another process can be neither pinned, re-prioritised,
limited nor made the owner of a descriptor (its SIGIO)."""

from __future__ import annotations

import platform
import signal
import subprocess
import sys

import pytest

from evaluator.sandbox.syscall_filter import program

UNDER_FILTER = """
import ctypes, os, resource, signal, threading, time
from evaluator.sandbox.syscall_filter import install, CLONE_PARENT
other = os.fork()
if other == 0:
    time.sleep(1)  # outlives the checks (it cannot be killed from here any more)
    os._exit(0)
libc = ctypes.CDLL(None, use_errno=True)
assert libc.prctl(41, 1, 0, 0, 0) == 0  # transparent huge pages off, as the zygote sets them
assert install()
assert libc.kill(os.getpid(), 0) == 0 and libc.kill(0, 0) == 0
for refused in (lambda: os.sched_setaffinity(other, {{0}}), lambda: os.setpriority(os.PRIO_PROCESS, other, 10),
                lambda: os.setpriority(os.PRIO_USER, 0, 10),
                lambda: resource.prlimit(other, resource.RLIMIT_CPU, (1, 1))):
    try:
        refused()
        raise SystemExit("another process was changed")
    except PermissionError:
        pass
import fcntl
r, w = os.pipe()
try:
    fcntl.fcntl(r, fcntl.F_SETOWN, other)  # its SIGIO would go to the other process
    raise SystemExit("another process was made a descriptor's owner")
except PermissionError:
    pass
fcntl.fcntl(r, fcntl.F_SETOWN, os.getpid())
os.sched_setaffinity(0, os.sched_getaffinity(0))
os.setpriority(os.PRIO_PROCESS, 0, 1)
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
signal.signal(signal.SIGUSR1, lambda *args: None)
signal.raise_signal(signal.SIGUSR1)
t = threading.Thread(target=lambda: None)
t.start()
t.join()
import torch
torch.set_num_threads(2)
assert torch.ones(1 << 22).sum().item() == 1 << 22
pid = os.fork()
if pid == 0:
    os._exit(3)
assert os.waitpid(pid, 0)[1] >> 8 == 3
libc.syscall.restype = ctypes.c_long
assert libc.syscall(435, 0, 0) == -1 and ctypes.get_errno() == 38  # clone3: ENOSYS
assert libc.prctl(41, 0, 0, 0, 0) == -1 and ctypes.get_errno() == 1  # PR_SET_THP_DISABLE: EPERM, pages stay as set
assert libc.prctl(42, 0, 0, 0, 0) == 1  # PR_GET_THP_DISABLE: still off, as set before the filter
assert libc.prctl(16, b"w", 0, 0, 0) == 0  # PR_SET_NAME and the other options are untouched
print("ok", flush=True)
if {fatal!r} == "clone_parent":
    libc.syscall({clone}, CLONE_PARENT | 17, 0, 0, 0, 0)
elif {fatal!r} == "signal_other":
    libc.kill(other, 0)
elif {fatal!r} == "signal_everyone":
    libc.kill(-1, 0)
else:
    raise SystemExit(0)
print("survived", flush=True)
"""


@pytest.mark.skipif(program(platform.machine(), 1) is None, reason="no syscall numbers for this machine")
@pytest.mark.parametrize("fatal", [None, "clone_parent", "signal_other", "signal_everyone"])
def test_the_filter_keeps_the_worker_to_itself(fatal: str | None):
    clone = {"x86_64": 56, "aarch64": 220}[platform.machine()]
    run = subprocess.run([sys.executable, "-c", UNDER_FILTER.format(fatal=fatal, clone=clone)],
                         capture_output=True, text=True, timeout=120)
    assert run.stdout.split() == ["ok"], run.stderr
    assert run.returncode == (-signal.SIGSYS if fatal else 0), run.stderr


def test_no_program_for_an_unknown_machine():
    assert program("pdp11", 1) is None
    code = program("x86_64", 4321) or []
    assert (0x15, 0, 0, 4321) in [(c, 0, 0, k) for c, _, _, k in code]  # its own pid is in the filter


REACH = """
import ctypes, errno, os, socket
from evaluator.sandbox.syscall_filter import install
assert install(processes=False, reach=True)
try:
    socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    raise SystemExit("a Unix socket was made")
except PermissionError:
    pass
try:
    socket.socket(socket.AF_NETLINK, socket.SOCK_RAW)
    raise SystemExit("a netlink socket was made")
except PermissionError:
    pass
socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
socket.socket(socket.AF_INET6, socket.SOCK_DGRAM).close()
a, b = socket.socketpair()  # the pair reaches nothing: allowed
a.sendall(b"x"); assert b.recv(1) == b"x"
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
assert libc.shmget(0x0f0c4e21, 4096, 0o1666) == -1 and ctypes.get_errno() == errno.EPERM
assert libc.semget(0x0f0c4e21, 1, 0o1666) == -1 and ctypes.get_errno() == errno.EPERM
assert libc.msgget(0x0f0c4e21, 0o1666) == -1 and ctypes.get_errno() == errno.EPERM
assert libc.syscall(425, 4, 0) == -1 and ctypes.get_errno() == errno.ENOSYS  # io_uring_setup
import torch
assert torch.ones(1 << 20).sum().item() == 1 << 20
print("ok", flush=True)
"""


HANDLERS = """
import ctypes, errno, signal
from evaluator.sandbox.syscall_filter import install
assert install(processes=False, reach=True, handlers=True)
for sig in (signal.SIGSEGV, signal.SIGBUS, signal.SIGTRAP, signal.SIGILL, signal.SIGFPE):
    try:
        signal.signal(sig, lambda *a: None)
        raise SystemExit(f"a handler for {sig!r} was set")
    except OSError as exc:
        assert exc.errno == errno.EPERM, exc
signal.signal(signal.SIGUSR1, lambda *a: None)  # other signals: as before
signal.raise_signal(signal.SIGUSR1)
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
import platform
assert libc.syscall({"x86_64": 323, "aarch64": 282}[platform.machine()], 0) == -1 and ctypes.get_errno() == errno.EPERM
old = (ctypes.c_char * 152)()
assert libc.sigaction(signal.SIGSEGV, None, old) == 0  # a NULL new action: a read, allowed
import torch
assert torch.ones(1 << 20).sum().item() == 1 << 20
print("ok", flush=True)
"""


@pytest.mark.skipif(program(platform.machine(), 1) is None, reason="no syscall numbers for this machine")
def test_no_handler_for_a_fault_or_trap_signal_and_no_userfaultfd():
    """A SIGSEGV or SIGTRAP handler ran a candidate's deferred work when the harness touched an output page it had
    left unmapped, or reached a C library function it had patched with int3, after the timer's end mark."""
    proc = subprocess.run([sys.executable, "-c", HANDLERS], capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip() == "ok", proc.stdout + proc.stderr


@pytest.mark.skipif(program(platform.machine(), 1) is None, reason="no syscall numbers for this machine")
def test_sockets_and_ipc_reach_nothing_outside():
    """socket() makes network sockets only (a Unix socket would reach PostgreSQL's or MariaDB's socket file); System V
    IPC and message queues answer EPERM, io_uring ENOSYS; a socketpair and PyTorch still work."""
    proc = subprocess.run([sys.executable, "-c", REACH], capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip() == "ok", proc.stdout + proc.stderr
