"""What a sandboxed process may read (Landlock's read rules, `landlock.restrict`): the candidate's worker and the
build stage's compilers, with bubblewrap or without it.

Without bubblewrap's mount namespace, a process of the user reads whatever the user may: the home directory (`~/.ssh`,
credentials, the store's SQLite file, config files), other evaluations' private directories in /tmp, the build caches
(other candidates' libraries and logs), /etc (a database's maintenance password). The rules below keep reads to the
system's programs and libraries, a few /etc files that the C library reads, the Python installation, and the project's
`evaluator` package (never the project's folder itself: it may hold the store, a `.env`, the config); the caller adds
the process's private directory.
"""

from __future__ import annotations

import site
import sys
import sysconfig
from pathlib import Path

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# What the C library, the dynamic loader and Python's start read in /etc (never the whole of /etc: /etc/shadow,
# /etc/mysql/debian.cnf and the like live there).
ETC_FILES = tuple(f"/etc/{name}" for name in (
    "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "timezone", "passwd", "group", "nsswitch.conf",
    "hosts", "host.conf", "gai.conf", "alternatives", "os-release", "mime.types", "locale.alias"))
# A worker reads its own process's files and the machine's CPU and memory layout (OpenMP, torch's CPU
# capabilities, the cache sizes); bubblewrap's own /proc shows only its namespace's processes.
WORKER_KERNEL_FILES = ("/proc", "/sys")
# A compiler reads the CPU's features (-march=native) and nothing else of the kernel's.
BUILD_KERNEL_FILES = ("/proc/cpuinfo", "/proc/meminfo", "/sys/devices/system/cpu")


def project_root() -> Path:
    return Path(__file__).resolve().parents[2]


def _holds(outer: Path, inner: Path) -> bool:
    try:
        inner.resolve().relative_to(outer.resolve())
        return True
    except (ValueError, OSError):
        return False


def python_installation() -> tuple[str, ...]:
    """The interpreter, its standard library and site-packages (a virtualenv and the installation it was made from),
    and the project's `evaluator` package: no folder that holds the project (a checkout's parent, $HOME)."""
    root = project_root()
    wanted = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, str(Path(sys.executable).parent),
              *sysconfig.get_paths().values(), *site.getsitepackages(),
              *(p for p in sys.path[1:] if p and Path(p).is_dir())}
    kept = [p for p in wanted if p and not _holds(Path(p), root)]
    return tuple(sorted(set(kept))) + (str(root / "evaluator"),)


def worker_reads() -> tuple[str, ...]:
    """The candidate worker's readable paths, its private directory aside."""
    return SYSTEM_DIRS + ETC_FILES + WORKER_KERNEL_FILES + python_installation()


def build_reads(include_dirs: tuple[str, ...] = ()) -> tuple[str, ...]:
    """A compiler's readable paths, its build folder aside: the system's toolchain, `include_dirs` (Python's and
    torch's headers and libraries for an extension), and nothing of the Python installation otherwise."""
    return SYSTEM_DIRS + ETC_FILES + BUILD_KERNEL_FILES + tuple(include_dirs)
