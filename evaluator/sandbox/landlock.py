"""Landlock, the kernel's unprivileged file-system sandbox: the candidate's worker may write only below its own
private working directory (and to a few harmless device files) and read only what it needs, whether bubblewrap runs
or not.

Bubblewrap gives the candidate a read-only root; without it (a machine or container where it cannot make namespaces)
the process sandbox alone left every file the user can write within reach: the repository, the build caches that
other candidates' builds come from, a `.pth` file in site-packages that runs code in every later Python process of
that user, the driver's included. Landlock (Linux 5.13 and later) closes that from inside the worker, with no
privileges: once restricted, the process and every thread or child it starts can no longer create, write, truncate,
rename or delete anything outside the allowed paths. Reads are limited too (`restrict` with `readable`, the paths of
`read_view.py`): without bubblewrap's mount namespace they were the user's whole file system (`~/.ssh`, the store,
other evaluations' folders in /tmp, the build caches). Where the kernel has them, the same ruleset refuses TCP (ABI 4)
and scopes abstract Unix sockets and signals to the restricted processes (ABI 6). The build jail (`build_jail.py`)
applies the same to the build stage's compilers.

Called on a CPU worker only: a GPU's driver and profiler open device files and write lock files of their own that
no test here can run; that is listed in docs/EVALUATOR.md.
"""

from __future__ import annotations

import ctypes
import os
import stat

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446  # the same on every architecture
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_DIR_WRITES = (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 10) | (1 << 11) | (1 << 12)
REFER = 1 << 13     # ABI 2: linking or renaming across directories
TRUNCATE = 1 << 14  # ABI 3
_NET_TCP = (1 << 0) | (1 << 1)  # ABI 4: bind and connect TCP ports (none allowed)
_SCOPES = (1 << 0) | (1 << 1)   # ABI 6: abstract Unix sockets and signals of processes outside the domain
DEVICE_FILES = ("/dev/null", "/dev/zero", "/dev/full")
READABLE_DEVICES = ("/dev/urandom", "/dev/random")
_READS = EXECUTE | READ_FILE | READ_DIR

class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def abi_version() -> int:
    """The kernel's Landlock ABI version; 0 where Landlock is missing or switched off."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    version = libc.syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    return max(0, int(version))


def restrict_writes(writable_dirs: tuple[str, ...], writable_files: tuple[str, ...] = DEVICE_FILES) -> str | None:
    """Allow writes only below `writable_dirs` and to `writable_files` (those that exist), for this thread and
    everything it starts from now on; reads stay as they were. Returns None once restricted, else why it could not be
    (no Landlock)."""
    return restrict(writable_dirs, writable_files, readable=None)


def restrict(writable_dirs: tuple[str, ...], writable_files: tuple[str, ...] = DEVICE_FILES,
             readable: tuple[str, ...] | None = ()) -> str | None:
    """Allow writes only below `writable_dirs` and to `writable_files`; with `readable` (not None), reads and
    execution only below those paths, the writable ones and `READABLE_DEVICES`, and (ABI 4 and later) no TCP, (ABI 6)
    no abstract Unix socket and no signal to a process outside this one's tree of restricted processes. For this thread
    and everything it starts from now on, exec'd programs included. None once restricted, else why not."""
    abi = abi_version()
    if abi < 1:
        return "Landlock is not available in this kernel"
    file_writes = WRITE_FILE | (TRUNCATE if abi >= 3 else 0)
    handled = file_writes | _DIR_WRITES | (REFER if abi >= 2 else 0)
    reads = 0 if readable is None else _READS
    # struct landlock_ruleset_attr: handled_access_fs, handled_access_net (ABI 4), scoped (ABI 6); an older kernel
    # reads only the fields it knows, and refuses a larger size.
    fields = [handled | reads]
    if readable is not None and abi >= 4:
        fields.append(_NET_TCP)
        if abi >= 6:
            fields.append(_SCOPES)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    attr = (ctypes.c_uint64 * len(fields))(*fields)
    ruleset = libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(8 * len(fields)),
                           ctypes.c_uint32(0))
    if ruleset < 0:
        return f"Landlock refused a ruleset ({os.strerror(ctypes.get_errno())})"
    try:
        rules = [(d, handled | reads) for d in writable_dirs] + [(f, file_writes | (reads & READ_FILE))
                                                                 for f in writable_files]
        if readable is not None:
            rules += [(r, reads) for r in (*readable, *READABLE_DEVICES)]
        for path, access in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # a path this machine lacks
            try:
                if not stat.S_ISDIR(os.fstat(fd).st_mode):
                    access &= READ_FILE | EXECUTE | file_writes  # a rule on a file takes file rights only
                rule = _PathBeneath(access, fd)
                if libc.syscall(_SYS_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH),
                                ctypes.byref(rule), ctypes.c_uint32(0)) < 0:
                    return f"Landlock refused a rule for {path} ({os.strerror(ctypes.get_errno())})"
            finally:
                os.close(fd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return f"no_new_privs could not be set ({os.strerror(ctypes.get_errno())})"
        if libc.syscall(_SYS_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) < 0:
            return f"Landlock could not restrict the process ({os.strerror(ctypes.get_errno())})"
        return None
    finally:
        os.close(ruleset)
