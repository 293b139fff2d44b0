"""Building a `NativeSpec` into a shared library, and the per-user cache of those builds.

`compile_library` runs the system C/C++ compiler on the recorded sources (nothing else: no Python of the candidate),
optionally under a sandbox prefix (the evaluator's builder). `NativeCache` keeps one outcome per key, where key =
sha256(spec digest, compiler and its version, build format):

    root/v1/<key[:2]>/<key>/record.json   built | compile_error, the compiler's log, the library's sha256
    root/v1/<key[:2]>/<key>/lib<name>.so  the library, for a build that worked
    root/v1/locks/<key>.lock              flock: one build per key at a time, across processes
    root/v1/tmp/                          staging; an entry appears by an atomic rename

`root` is $OPFORGE_NATIVE_BUILD_CACHE, else $XDG_CACHE_HOME/opforge/native-builds, else ~/.cache/opforge/native-builds.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

from evaluator.wire.build_verdict import BuildVerdict  # the standard library only

if TYPE_CHECKING:  # torch-free at run time: a driver computes the cache's path before it imports torch
    from evaluator.build.native_spec import NativeSpec

BUILD_FORMAT = 1
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


@contextlib.contextmanager
def key_lock(path: Path, deadline: float, poll_s: float) -> Iterator[bool]:
    """One build of a key at a time across processes (an flock on the key's lock file); yields False where another
    build still holds it at `deadline` (time.monotonic()). Shared by the native and the CUDA build caches (this module is vendored into exported packages: it imports
    nothing of opforge's)."""
    with open(path, "a") as f:
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    yield False
                    return
                time.sleep(poll_s)
        try:
            yield True
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


class NativeCache:
    def __init__(self, root: Path):
        self.root = root
        self.base = root / f"v{BUILD_FORMAT}"
        for sub in ("locks", "tmp"):
            (self.base / sub).mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):
            os.chmod(root, 0o700)

    def entry(self, key: str) -> Path:
        return self.base / key[:2] / key

    def lookup(self, key: str) -> Outcome | None:
        entry = self.entry(key)
        try:
            record = json.loads((entry / "record.json").read_text())
            if record["key"] != key or record["status"] not in STORED:
                return None
            data = b""
            if record["status"] == BuildVerdict.BUILT:
                data = (entry / record["library"]).read_bytes()
                if hashlib.sha256(data).hexdigest() != record["library_sha256"]:
                    return None
            return Outcome(BuildVerdict(record["status"]), key, record.get("log", ""), data, cached=True)
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def library_path(self, key: str) -> Path | None:
        """The cached library's path (a local build loads it in place)."""
        record = self.record(key)
        return self.entry(key) / record["library"] if record and record.get("status") == BuildVerdict.BUILT else None

    def record(self, key: str) -> dict | None:
        try:
            return json.loads((self.entry(key) / "record.json").read_text())
        except (OSError, ValueError):
            return None

    def compiles(self) -> list[dict]:
        """Every compiler run so far (one dict per run: key, name, status, context, started, finished)."""
        try:
            lines = (self.base / "compiles.log").read_text().splitlines()
        except OSError:
            return []
        out = []
        for line in lines:
            with contextlib.suppress(ValueError):
                out.append(json.loads(line))
        return out

    def get_or_build(self, spec: NativeSpec, *, timeout_s: float = COMPILE_TIMEOUT_S,
                     prefix_for: Callable[[Path], Sequence[str] | None] | None = None,
                     env_for: Callable[[Path], dict[str, str]] | None = None, context: str = "local") -> Outcome:
        """The cached outcome, or a fresh build (stored unless it timed out or no compiler could run). `prefix_for`
        and `env_for` give the compiler's sandbox and environment for a build folder (None from `prefix_for`: the
        sandbox does not work here)."""
        key = entry_key(spec)
        if (hit := self.lookup(key)) is not None:
            return hit
        deadline = time.monotonic() + timeout_s
        with self._lock(key, deadline) as locked:
            if not locked:
                return Outcome(BuildVerdict.TIMEOUT, key, "another build of the same sources did not finish in time")
            if (hit := self.lookup(key)) is not None:
                return hit
            with tempfile.TemporaryDirectory(prefix="native-build-") as work:
                prefix = prefix_for(Path(work)) if prefix_for is not None else ()
                if prefix is None:
                    return Outcome(BuildVerdict.UNAVAILABLE, key, "the native builder's sandbox does not work here")
                env = env_for(Path(work)) if env_for is not None else None
                started = time.time()
                outcome = build_once(spec, key, Path(work), deadline - time.monotonic(), prefix, env)
                if outcome.status != BuildVerdict.UNAVAILABLE:
                    self._note(key, spec, outcome.status, context, started, time.time())
                if outcome.status in STORED:
                    self._store(key, spec, outcome, context)
        return outcome

    # -- internals --------------------------------------------------------------------------------------------------
    def _lock(self, key: str, deadline: float) -> contextlib.AbstractContextManager[bool]:
        return key_lock(self.base / "locks" / f"{key}.lock", deadline, poll_s=0.05)

    def _note(self, key: str, spec: NativeSpec, status: str, context: str, started: float, finished: float) -> None:
        line = json.dumps({"key": key, "name": spec.name, "status": status, "context": context, "pid": os.getpid(),
                           "started": started, "finished": finished})
        with open(self.base / "compiles.log", "a") as f:
            f.write(line + "\n")

    def _store(self, key: str, spec: NativeSpec, outcome: Outcome, context: str) -> None:
        staging = Path(tempfile.mkdtemp(prefix="entry-", dir=self.base / "tmp"))
        record: dict[str, Any] = {"format": BUILD_FORMAT, "key": key, "spec_digest": spec.digest, "name": spec.name,
                  "status": outcome.status, "log": outcome.log, "library": None, "context": context,
                  "build_id": uuid.uuid4().hex}
        if outcome.status == BuildVerdict.BUILT:
            record["library"] = f"lib{spec.name}.so"
            record["library_sha256"] = hashlib.sha256(outcome.library).hexdigest()
            (staging / record["library"]).write_bytes(outcome.library)
        (staging / "record.json").write_text(json.dumps(record, indent=1))
        target = self.entry(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists():  # a damaged entry (lookup missed it): moved away, then replaced
            trash = self.base / "tmp" / f"trash-{uuid.uuid4().hex}"
            os.rename(target, trash)
            shutil.rmtree(trash, ignore_errors=True)
        os.rename(staging, target)


def build_once(spec: NativeSpec, key: str, work: Path, timeout_s: float, prefix: Sequence[str] = (),
               env: dict[str, str] | None = None) -> Outcome:
    """One compiler run, its outcome as data."""
    try:
        path = compile_library(spec, work, max(timeout_s, 1.0), prefix, env)
        return Outcome(BuildVerdict.BUILT, key, "", path.read_bytes())
    except NativeBuildError as exc:
        if compiler(spec.language) is None:
            return Outcome(BuildVerdict.UNAVAILABLE, key, str(exc))
        return Outcome(BuildVerdict.COMPILE_ERROR, key, str(exc))
    except subprocess.TimeoutExpired:
        return Outcome(BuildVerdict.TIMEOUT, key, f"load_c({spec.name!r}): the compiler took over {timeout_s:.0f} s")
    except OSError as exc:
        return Outcome(BuildVerdict.UNAVAILABLE, key, f"load_c({spec.name!r}): the compiler could not run ({exc})")
