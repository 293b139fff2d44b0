"""Compile-checking CUDA sources where nvcc exists but no GPU does.

On such a machine `load_inline` cannot link a CUDA extension against a CPU build of PyTorch, yet a compile error is
still the most useful feedback a coder can get. So the candidate worker compiles each source to an object file (nvcc
for CUDA, the host compiler for C++), reports errors as `compile_error`, and a clean compile as "cannot run here".
"""

from __future__ import annotations

import shutil
import subprocess
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

COMPILE_TIMEOUT_S = 300


class CompileFailed(Exception):
    """The sources do not compile; the message holds the compiler's log."""


class NoCudaDevice(Exception):
    """The sources compiled, but there is no CUDA device here to run them on."""


def _as_text(sources: Any) -> str:
    if sources is None:
        return ""
    if isinstance(sources, str):
        return sources
    return "\n".join(sources)


def include_flags() -> list[str]:
    from torch.utils import cpp_extension
    dirs = list(cpp_extension.include_paths()) + [sysconfig.get_paths()["include"]]
    return [f"-I{d}" for d in dirs]


def check_compiles(name: str, cpp_sources: Any, cuda_sources: Any, kwargs: dict[str, Any]) -> None:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise NoCudaDevice("no nvcc and no CUDA device here: CUDA sources can neither be compiled nor run")
    workdir = Path(tempfile.mkdtemp(prefix=f"cuda-{name}-"))
    header = "#include <torch/extension.h>\n"
    cu = workdir / "kernel.cu"
    cu.write_text(header + _as_text(cuda_sources))
    extra = [f for f in (kwargs.get("extra_cuda_cflags") or []) if f.startswith(("-D", "-O", "--use_fast_math"))]
    cmds = [[nvcc, "-c", str(cu), "-o", str(workdir / "kernel.o"), "-std=c++17", "-Xcompiler", "-fPIC",
             "-arch=sm_90", *include_flags(), *extra]]
    cpp = _as_text(cpp_sources)
    if cpp.strip():
        cc = shutil.which("g++") or shutil.which("c++")
        if cc:
            (workdir / "main.cpp").write_text(header + cpp)
            cmds.append([cc, "-fsyntax-only", "-std=c++17", str(workdir / "main.cpp"), *include_flags()])
    for cmd in cmds:
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S, cwd=workdir)
        except subprocess.TimeoutExpired:
            raise CompileFailed(f"{Path(cmd[0]).name} took over {COMPILE_TIMEOUT_S} s") from None
        if proc.returncode != 0:
            log = (proc.stderr or proc.stdout).replace(str(workdir) + "/", "")
            raise CompileFailed(log[-6000:])
    raise NoCudaDevice("the CUDA sources compiled with nvcc, but there is no CUDA device here to run them on")
