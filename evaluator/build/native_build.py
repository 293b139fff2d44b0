"""Building a `NativeSpec` into a shared library, and the per-user cache of those builds.

`compile_library` runs the system C/C++ compiler on the recorded sources (nothing else: no Python of the candidate),
optionally under a sandbox prefix (the evaluator's builder). `NativeCache` keeps one outcome per key, where key =
sha256(spec digest, compiler and its version, build format), in the entries of `entry_cache.py` (shared with the CUDA
build cache):

    root/v2/entries/<key[:2]>/<key>/record.json   built | compile_error, the compiler's log, the library's sha256
    root/v2/entries/<key[:2]>/<key>/lib<name>.so  the library, for a build that worked
    root/v2/compiles.log                          one JSON line each time a compiler actually ran
    root/v2/locks/<key>.lock                      flock: one build per key at a time, across processes
    root/v2/tmp/                                  staging; an entry appears by an atomic rename

Format 2 (2026-11-29) is format 1's entries in the shared layout: under `entries/`, the record's outcome in `verdict`
and its library in `artifact`/`artifact_sha256` (format 1: `status`, `library`, `library_sha256`). Format 1 entries
stay in `v1/`, unread: their builds are made again once.

`root` is $OPFORGE_NATIVE_BUILD_CACHE, else $XDG_CACHE_HOME/opforge/native-builds, else ~/.cache/opforge/native-builds.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from evaluator.build.entry_cache import EntryCache, Fresh
from evaluator.wire.build_verdict import BuildVerdict  # the standard library only

if TYPE_CHECKING:  # torch-free at run time: a driver computes the cache's path before it imports torch
    from evaluator.build.native_spec import NativeSpec

BUILD_FORMAT = 2  # 2: the shared entry layout (entry_cache.py); format 1's entries are not read
CACHE_ENV = "OPFORGE_NATIVE_BUILD_CACHE"
COMPILE_TIMEOUT_S = 120
LOG_LIMIT_CHARS = 6000
STORED = (BuildVerdict.BUILT, BuildVerdict.COMPILE_ERROR)

log = logging.getLogger(__name__)


class NativeBuildError(RuntimeError):
    """The sources did not compile (the message holds the compiler's log), or no compiler could run."""


class CompilerMissing(NativeBuildError):
    """No compiler for the sources' language is installed: one sentence naming it and what to install."""

    def __init__(self, name: str, language: str) -> None:
        self.name, self.language = name, language
        if language == "c":
            what, looked, variable, apt, dnf = "C", "$CC, gcc and cc", "CC", "gcc", "gcc"
        else:
            what, looked, variable, apt, dnf = "C++", "$CXX, g++ and c++", "CXX", "g++", "gcc-c++"
        self.reason = (f"no {what} compiler was found (looked for {looked}); install one (e.g. `apt install {apt}` or "
                       f"`dnf install {dnf}`) or set {variable} to a compiler's path")
        super().__init__(f"load_c({name!r}): {self.reason}")


@dataclass(frozen=True, slots=True)
class Outcome:
    """One build's outcome: built (with the library's bytes) | compile_error | timeout | unavailable."""

    status: BuildVerdict
    key: str
    log: str = ""
    library: bytes = b""
    cached: bool = False  # answered from the cache: no compiler ran for this request


def cache_root() -> Path:
    value = os.environ.get(CACHE_ENV, "").strip()
    if value:
        return Path(value).expanduser().resolve()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base, "opforge", "native-builds").resolve()


def open_cache() -> NativeCache | None:
    """The per-user native build cache; None where it cannot be created (builds then stay uncached)."""
    try:
        return NativeCache(cache_root())
    except OSError as exc:
        log.warning("the native build cache %s cannot be used (%s); native builds are not cached", cache_root(), exc)
        return None


def compiler(language: str) -> str | None:
    names = (os.environ.get("CXX", ""), "g++", "c++") if language == "c++" else (os.environ.get("CC", ""), "gcc", "cc")
    return next((found for n in names if n and (found := shutil.which(n))), None)


@functools.lru_cache(maxsize=8)
def compiler_version(exe: str) -> str:
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    first = next((line.strip() for line in out.splitlines() if line.strip()), "unknown")
    return f"{exe} {first}"


def entry_key(spec: NativeSpec) -> str:
    exe = compiler(spec.language) or "none"
    toolchain = {"format": BUILD_FORMAT, "compiler": compiler_version(exe) if exe != "none" else exe,
                 "recipe": commands(spec, "CC", ["SOURCES"], "OUTPUT")}  # default flags changed: another build
    return hashlib.sha256(json.dumps({"spec": spec.digest, "toolchain": toolchain}, sort_keys=True).encode()).hexdigest()


# The only spec flag the link step takes. -ffast-math and -Ofast there make gcc (12 and older) and clang link
# crtfastmath.o into a shared library, whose constructor sets the x86 FTZ/DAZ bits of the loading process: every
# later float computation in that process (PyTorch's, a test runner's, an exported package's user's) would flush
# subnormals to zero. They stay compile flags only.
_LINK_FLAGS = ("-fopenmp",)


def commands(spec: NativeSpec, exe: str, sources: Sequence[str], output: str) -> list[list[str]]:
    """The compiler's two command lines. Compiling: the spec's flags (an allow-list), a default standard (C11 or
    C++17 with GNU extensions, so M_PI and POSIX names are declared, as gcc does by default) and -O2 where it names
    none, position-independent objects. Linking: a shared library with no undefined symbols left (a clear error now,
    not at load), -lm, OpenMP where asked, and never the fast-math start file (see _LINK_FLAGS)."""
    flags = list(spec.flags)
    defaults = ["-std=gnu11" if spec.language == "c" else "-std=gnu++17"] if not any(
        f.startswith("-std=") for f in flags) else []
    if not any(f.startswith("-O") for f in flags):
        defaults.append("-O2")
    if spec.language == "c++":
        defaults.append("-Drestrict=__restrict__")  # C's `restrict` keyword, so one kernel text compiles as both
    objects = [f"{Path(name).stem}.o" for name in sources]
    link = [f for f in flags if f in _LINK_FLAGS]
    return [[exe, *defaults, *flags, "-fPIC", "-c", *sources],
            [exe, *link, "-shared", "-Wl,--no-undefined", "-o", output, *objects, "-lm"]]


def compile_library(spec: NativeSpec, workdir: Path, timeout_s: float = COMPILE_TIMEOUT_S,
                    prefix: Sequence[str] = (), env: dict[str, str] | None = None, exe: str | None = None) -> Path:
    """Writes the sources into `workdir`, compiles them into `workdir/lib<name>.so` and returns its path. Raises
    NativeBuildError (the compiler's log) or subprocess.TimeoutExpired."""
    exe = exe or compiler(spec.language)
    if exe is None:
        raise CompilerMissing(spec.name, spec.language)
    suffix = ".c" if spec.language == "c" else ".cpp"
    names = []
    for i, text in enumerate(spec.sources):
        names.append(f"{spec.name}_{i}{suffix}")
        (workdir / names[-1]).write_text(text)
    output = f"lib{spec.name}.so"
    deadline = time.monotonic() + timeout_s
    for line in commands(spec, exe, names, output):
        returncode, out = _run_compiler([*prefix, *line], workdir, env, deadline)
        if returncode != 0:
            text = out.decode("utf-8", "replace").replace(f"{workdir}/", "").replace(str(workdir), ".")
            raise NativeBuildError(f"load_c({spec.name!r}): the sources do not compile:\n{text[-LOG_LIMIT_CHARS:]}")
    if not (workdir / output).is_file():
        raise NativeBuildError(f"load_c({spec.name!r}): the compiler wrote no library")
    return workdir / output


def _run_compiler(line: list[str], workdir: Path, env: dict[str, str] | None, deadline: float) -> tuple[int, bytes]:
    """One compiler command in its own session; raises subprocess.TimeoutExpired past the build's deadline."""
    proc = subprocess.Popen(line, cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # the driver and its cc1/as/ld children
        proc.communicate()
        raise
    return proc.returncode, out


class NativeCache:
    """`load_c`'s cache: its entries (`entry_cache.py`, shared with the CUDA build cache) and how a miss is built (the
    system compiler, in the evaluator's builder sandbox where one is given)."""

    def __init__(self, root: Path):
        self.root = root
        self.entries = EntryCache(root, BUILD_FORMAT, STORED, poll_s=0.05)
        with contextlib.suppress(OSError):
            os.chmod(root, 0o700)

    def entry(self, key: str) -> Path:
        return self.entries.entry(key)

    def lookup(self, key: str) -> Outcome | None:
        hit = self.entries.lookup(key)
        return None if hit is None else Outcome(hit.verdict, key, hit.log, hit.data, cached=True)

    def library_path(self, key: str) -> Path | None:
        """The cached library's path (a local build loads it in place)."""
        record = self.record(key)
        if not record or record.get("verdict") != BuildVerdict.BUILT or not isinstance(record.get("artifact"), str):
            return None
        return self.entry(key) / record["artifact"]

    def record(self, key: str) -> dict[str, Any] | None:
        return self.entries.record(key)

    def compiles(self) -> list[dict[str, Any]]:
        """Every compiler run so far (one dict per run: key, name, verdict, context, pid, started, finished)."""
        return self.entries.compiles()

    def get_or_build(self, spec: NativeSpec, *, timeout_s: float = COMPILE_TIMEOUT_S,
                     prefix_for: Callable[[Path], Sequence[str] | None] | None = None,
                     env_for: Callable[[Path], dict[str, str]] | None = None, context: str = "local") -> Outcome:
        """The cached outcome, or a fresh build (stored unless it timed out or no compiler could run). `prefix_for`
        and `env_for` give the compiler's sandbox and environment for a build folder (None from `prefix_for`: the
        sandbox does not work here)."""
        key = entry_key(spec)

        def build(work: Path, left_s: float) -> Fresh:
            prefix = prefix_for(work) if prefix_for is not None else ()
            if prefix is None:
                return Fresh(BuildVerdict.UNAVAILABLE, "the native builder's sandbox does not work here")
            env = env_for(work) if env_for is not None else None
            return _attempt(spec, work, left_s, prefix, env)

        got = self.entries.get_or_build(key, time.monotonic() + timeout_s, build, name=spec.name, context=context,
                                        fields={"spec_digest": spec.digest, "name": spec.name},
                                        work_prefix="native-build-")
        return Outcome(got.verdict, key, got.log, got.data, got.cached)


def build_once(spec: NativeSpec, key: str, work: Path, timeout_s: float, prefix: Sequence[str] = (),
               env: dict[str, str] | None = None) -> Outcome:
    """One compiler run, its outcome as data."""
    fresh = _attempt(spec, work, timeout_s, prefix, env)
    return Outcome(fresh.verdict, key, fresh.log, fresh.artifact.read_bytes() if fresh.artifact is not None else b"")


def _attempt(spec: NativeSpec, work: Path, timeout_s: float, prefix: Sequence[str],
             env: dict[str, str] | None) -> Fresh:
    """One compiler run in `work`: the library stays there (the cache copies it, `build_once` reads it)."""
    try:
        return Fresh(BuildVerdict.BUILT, "", compile_library(spec, work, max(timeout_s, 1.0), prefix, env))
    except NativeBuildError as exc:
        if compiler(spec.language) is None:
            return Fresh(BuildVerdict.UNAVAILABLE, str(exc))
        return Fresh(BuildVerdict.COMPILE_ERROR, str(exc))
    except subprocess.TimeoutExpired:
        return Fresh(BuildVerdict.TIMEOUT, f"load_c({spec.name!r}): the compiler took over {timeout_s:.0f} s")
    except OSError as exc:
        return Fresh(BuildVerdict.UNAVAILABLE, f"load_c({spec.name!r}): the compiler could not run ({exc})")
