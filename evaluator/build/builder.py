"""The trusted builder: compilers run on recorded CUDA sources, never any of the candidate's Python.

Used by the build cache (`build/cache.py`) inside a sandbox of its own, and by the candidate worker's private
fallback (`cuda_fallback.check_compiles`) without one. Two kinds of build:

- `compile_check` (a CPU build of torch, no GPU): nvcc compiles cuda.cu to an object and the host compiler checks
  main.cpp, at once; a failure is the candidate's compile error, with the compiler's log;
- `link` (a CUDA build of torch): PyTorch's own ninja recipe for load_inline builds `<name>.so`, which is not loaded
  here. GPU path: verified only on CPU machines so far.

The sandbox (`builder_prefix`) is bubblewrap with a minimal view: /usr and the /lib links, a few /etc files for the
dynamic loader, /sys, the Python installation and the toolchains, and the build's own folder (writable); not /tmp,
not the home directories, not the project, not /etc/shadow. So `#include "/home/you/.ssh/id_rsa"` finds nothing.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import shutil
import signal
import site
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Callable, Sequence

from evaluator.sandbox.bwrap import bwrap_available, under
from evaluator.build.cuda import (LOG_LIMIT_CHARS, BuildSpec, CompileFailed, arch_flags, cxx_path, default_archs,
                                  include_flags, nvcc_path)
from evaluator.sandbox.zygote_env import PROJECT_ROOT

log = logging.getLogger(__name__)


class BuildTimeout(Exception):
    """The compilers ran past their deadline (never cached)."""


class BuilderFailed(Exception):
    """The build machinery itself failed (not the candidate's sources); never cached."""


# -- compilers ---------------------------------------------------------------------------------------------------------
def run_concurrently(cmds: Sequence[Sequence[str]], cwd: Path, timeout_s: float, prefix: Sequence[str] = (),
                     env: dict[str, str] | None = None) -> tuple[int, str] | None:
    """Runs the commands at once (each as `prefix + cmd`); None when all succeed, else (exit status, output) of the
    first that failed, the others killed. Raises BuildTimeout past the deadline."""
    procs: list[subprocess.Popen[bytes]] = []
    logs = [tempfile.TemporaryFile() for _ in cmds]
    deadline = time.monotonic() + timeout_s
    try:
        for cmd, out in zip(cmds, logs):
            procs.append(subprocess.Popen([*prefix, *cmd], cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                          stderr=subprocess.STDOUT, start_new_session=True))
        while True:
            codes = [p.poll() for p in procs]
            failed = next((i for i, c in enumerate(codes) if c not in (None, 0)), None)
            if failed is not None:
                logs[failed].seek(0)
                text = logs[failed].read().decode("utf-8", "replace")
                return codes[failed] or 1, text.replace(f"{cwd}/", "").replace(str(cwd), ".")[-LOG_LIMIT_CHARS:]
            if all(c == 0 for c in codes):
                return None
            if time.monotonic() > deadline:
                raise BuildTimeout(f"{Path(cmds[0][0]).name} took over {timeout_s:.0f} s")
            time.sleep(0.05)
    finally:
        for p in procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
        for out in logs:
            out.close()


TORCH_CXX_STD = "-std=c++20"


def compile_check(spec: BuildSpec, workdir: Path, archs: str, timeout_s: float, prefix: Sequence[str] = (),
                  env: dict[str, str] | None = None) -> str | None:
    """Compiles the sources to objects (no linking, no GPU needed): None when they compile, else the compiler log."""
    nvcc = nvcc_path("check")
    if nvcc is None:
        raise BuilderFailed("no nvcc here")
    from torch.utils.cpp_extension import COMMON_NVCC_FLAGS
    (workdir / "cuda.cu").write_text(spec.cuda_cu())
    (workdir / "main.cpp").write_text(spec.main_cpp())
    defines = [f"-DTORCH_EXTENSION_NAME={spec.name}", "-DTORCH_API_INCLUDE_EXTENSION_H"]
    # The language standard of torch's own load_inline recipe (`-std=c++20` in torch 2.13's cpp_extension, for host
    # and device code): the check must accept what the real build accepts, so a candidate written for torch's recipe
    # (concepts, designated initialisers, std::span...) is not refused here as a compile error.
    std = [] if any(f.startswith("-std=") for f in spec.extra_cuda_cflags) else [TORCH_CXX_STD]
    cmds = [[nvcc, "-c", "cuda.cu", "-o", "cuda.o", *std, "-Xcompiler", "-fPIC", *arch_flags(archs),
             *include_flags(), *defines, *COMMON_NVCC_FLAGS, *spec.extra_cuda_cflags]]
    cxx = cxx_path()
    if cxx:
        std = [] if any(f.startswith("-std=") for f in spec.extra_cflags) else [TORCH_CXX_STD]
        cmds.append([cxx, "-fsyntax-only", *std, "main.cpp", *include_flags(), *defines, *spec.extra_cflags])
    failed = run_concurrently(cmds, workdir, timeout_s, prefix, env)
    return None if failed is None else failed[1]


# Trusted code run by the builder (inside its sandbox): PyTorch's own ninja recipe for load_inline, without loading
# the result. `_write_ninja_file_and_build_library` is private; its keyword names are filtered by its signature.
LINK_SCRIPT = r"""
import inspect, json, sys
from torch.utils import cpp_extension as ce
a = json.load(open(sys.argv[1]))
build = ce._write_ninja_file_and_build_library
kw = dict(name=a["name"], sources=a["sources"], extra_cflags=a["cflags"], extra_cuda_cflags=a["cuda_cflags"],
          extra_sycl_cflags=[], extra_ldflags=a["ldflags"], extra_include_paths=[], build_directory=a["dir"],
          verbose=True, with_cuda=True, with_sycl=False, is_standalone=False)
known = inspect.signature(build).parameters
try:
    build(**{k: v for k, v in kw.items() if k in known})
except RuntimeError as exc:
    print(exc, file=sys.stderr)
    sys.exit(3 if "Error building extension" in str(exc) else 4)
"""


def link(spec: BuildSpec, workdir: Path, python: str, timeout_s: float, prefix: Sequence[str] = (),
         env: dict[str, str] | None = None) -> Path:
    """Builds `<name>.so` with PyTorch's cpp_extension recipe (targets: TORCH_CUDA_ARCH_LIST in `env`). Raises
    CompileFailed with the log, BuildTimeout, or BuilderFailed. GPU path: verified only on CPU machines so far."""
    build = workdir / "build"
    build.mkdir()
    (build / "main.cpp").write_text(spec.main_cpp())
    (build / "cuda.cu").write_text(spec.cuda_cu())
    (workdir / "args.json").write_text(json.dumps({
        "name": spec.name, "sources": [str(build / "main.cpp"), str(build / "cuda.cu")], "dir": str(build),
        "cflags": list(spec.extra_cflags), "cuda_cflags": list(spec.extra_cuda_cflags),
        "ldflags": list(spec.extra_ldflags)}))
    cmd = [python, "-c", LINK_SCRIPT, str(workdir / "args.json")]
    failed = run_concurrently([cmd], workdir, timeout_s, prefix, env)
    if failed is not None:
        code, log = failed
        if code == 3:
            raise CompileFailed(log)
        raise BuilderFailed(f"the extension builder failed (exit status {code}): {log[-2000:]}")
    artifact = build / f"{spec.name}.so"
    if not artifact.is_file():
        raise BuilderFailed(f"the extension builder produced no {artifact.name}")
    return artifact


# -- the sandbox -------------------------------------------------------------------------------------------------------
def builder_env(work: Path, archs: str) -> dict[str, str]:
    env = {k: os.environ[k] for k in ("PATH", "LANG", "LC_ALL", "CUDA_HOME", "CUDA_PATH", "CC", "CXX",
                                      "LD_LIBRARY_PATH") if k in os.environ}
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '/usr/bin:/bin')}"
    if "CUDA_HOME" not in env:
        from torch.utils import cpp_extension
        if cpp_extension.CUDA_HOME:
            env["CUDA_HOME"] = cpp_extension.CUDA_HOME  # what load_inline would use here, found outside the sandbox
    env.update(HOME=str(work), TMPDIR=str(work), PYTHONNOUSERSITE="1", PYTHONDONTWRITEBYTECODE="1", TORCH_CUDA_ARCH_LIST=archs,
               TORCH_EXTENSIONS_DIR=str(work), MAX_JOBS="2")
    return env


def _use_bwrap(isolation: str) -> bool:
    return isolation == "bwrap" or (isolation == "auto" and _bwrap_works())


@functools.lru_cache(maxsize=1)
def _bwrap_works() -> bool:
    return bwrap_available()


def builder_prefix(work: Path, isolation: str, mode: str) -> list[str] | None:
    """The command prefix that runs a compiler in the CUDA builder's sandbox (see `sandboxed_prefix`)."""
    return sandboxed_prefix(work, isolation, lambda kind: _sandbox_works(mode, kind))


def sandbox_kind(isolation: str) -> str:
    """"bwrap" (the builders' bubblewrap view) or "jail" (`build_jail.py`: the same rights without bubblewrap)."""
    return "bwrap" if _use_bwrap(isolation) else "jail"


def sandboxed_prefix(work: Path, isolation: str, self_test: Callable[[str], bool]) -> list[str] | None:
    """The command prefix that runs a compiler in the builders' sandbox for `work`: bubblewrap's view where it runs,
    else the build jail (Landlock, namespaces, the syscall filter). None where the stage's own `self_test` of that
    kind (run once per process) failed: a view missing part of a toolchain must never be mistaken for a candidate's
    compile error, and cached as one; and no build runs unconfined."""
    kind = sandbox_kind(isolation)
    if not self_test(kind):
        return None
    return view_prefix(kind, work)


def view_prefix(kind: str, work: Path) -> list[str]:
    return _bwrap_view(work) if kind == "bwrap" else jail_prefix(work)


JAIL_SCRIPT = Path(__file__).resolve().parents[1] / "sandbox" / "build_jail.py"


def jail_prefix(work: Path) -> list[str]:
    """The build jail's command prefix: reads of the toolchain (`_toolchain_dirs`) and `work` alone."""
    from evaluator.sandbox.read_view import build_reads
    reads = build_reads(tuple(str(p) for p in _toolchain_dirs()))
    return [sys.executable, "-I", "-S", str(JAIL_SCRIPT), str(work.resolve()), *reads, "--"]


def plain_env(work: Path) -> dict[str, str]:
    """The environment of a plain C/C++ compiler in a sandbox (native kernels, CPU extensions): nothing of the
    caller's but a fixed PATH and locale, with `work` as home and temporary folder."""
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(work), "TMPDIR": str(work), "LANG": "C",
            "LC_ALL": "C"}


@functools.lru_cache(maxsize=1)
def _toolchain_dirs() -> tuple[Path, ...]:
    """The Python installation and its site-packages (never sys.path as such: a script's folder, maybe $HOME), the
    headers and the compilers' own folders outside /usr; never the project nor a folder holding it (it may hold
    secrets: .env, the store)."""
    from torch.utils import cpp_extension

    wanted = {Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix), Path(sys.executable).parent,
              Path(cpp_extension.__file__).parents[2], Path(sysconfig.get_paths()["include"]),
              *map(Path, site.getsitepackages())}
    for d in cpp_extension.include_paths() + [cpp_extension.CUDA_HOME or "/usr/local/cuda"]:
        wanted.add(Path(d))
    for exe in (nvcc_path("check"), nvcc_path("link"), cxx_path()):
        if exe:
            wanted.add(Path(exe).resolve().parent.parent)
    bound: list[Path] = [Path("/usr")]
    for p in sorted({q.resolve() for q in wanted if q.exists()}, key=lambda q: len(q.parts)):
        if p == Path("/") or under(PROJECT_ROOT, p) or any(under(p, b) for b in bound):
            continue
        bound.append(p)
    return tuple(bound[1:])


def _bwrap_view(work: Path) -> list[str]:
    # bwrap by its full path: the compilers' environment has a fixed PATH (`plain_env`), which may not hold it
    args = [shutil.which("bwrap") or "bwrap", "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
            "--die-with-parent", "--new-session", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32", "usr"):
        p = Path("/", top)
        if p.is_symlink():
            args += ["--symlink", os.readlink(p), str(p)]
        elif p.is_dir():
            args += ["--ro-bind", str(p), str(p)]
    for f in ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "passwd", "group", "nsswitch.conf"):
        args += ["--ro-bind-try", f"/etc/{f}", f"/etc/{f}"]
    args += ["--ro-bind-try", "/sys", "/sys"]
    for p in _toolchain_dirs():
        args += ["--ro-bind", str(p), str(p)]
    return args + ["--bind", str(work), str(work), "--chdir", str(work), "--"]


def probe_commands(mode: str, nvcc: str | None, cxx: str | None, lib_dirs: Sequence[str]) -> list[list[list[str]]]:
    """The self-test's stages (commands of a stage run side by side): compile a kernel and a file with torch's
    headers; for `link`, then link the kernel's object into a shared library against libcudart and torch's own
    libraries, as load_inline's recipe does, so that a view missing a library fails here and not on a candidate."""
    compile_stage = []
    if nvcc:
        compile_stage.append([nvcc, "-c", "probe.cu", "-o", "probe.o", "-Xcompiler", "-fPIC",
                              *arch_flags(default_archs())])
    if cxx:
        compile_stage.append([cxx, "-fsyntax-only", "probe.cpp", *include_flags()])
    stages = [compile_stage]
    if mode == "link" and nvcc and cxx:
        stages.append([[cxx, "-shared", "probe.o", "-o", "probe.so", *(f"-L{d}" for d in lib_dirs),
                        "-lc10", "-ltorch", "-lcudart"]])
    return stages


def _link_dirs() -> list[str]:
    from torch.utils import cpp_extension
    try:
        return list(cpp_extension.library_paths(device_type="cuda"))
    except (TypeError, OSError, RuntimeError):
        return list(cpp_extension.library_paths())


@functools.lru_cache(maxsize=8)
def _sandbox_works(mode: str, kind: str) -> bool:
    """Compiles a trivial kernel inside the builder's view once per process, so that a view missing some toolchain
    path is never mistaken for the candidate's compile error (and cached as one)."""
    with tempfile.TemporaryDirectory(prefix="opforge-build-probe-") as d:
        work = Path(d)
        (work / "probe.cu").write_text("__global__ void probe(float* x) { x[0] = 1.0f; }\n")
        (work / "probe.cpp").write_text("#include <Python.h>\n#include <c10/macros/Macros.h>\n")
        failed = None
        try:
            for cmds in probe_commands(mode, nvcc_path(mode), cxx_path(), _link_dirs()):  # each stage after the last
                failed = failed or run_concurrently(cmds, work, 120, view_prefix(kind, work),
                                                    builder_env(work, "9.0"))
        except (BuildTimeout, OSError) as exc:
            failed = (1, str(exc))
    if failed is not None:
        log.warning("the CUDA builder's sandbox does not work here; builds stay private to each evaluation: %s",
                    failed[1][-1000:])
    return failed is None
