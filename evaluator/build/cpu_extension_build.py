"""The trusted builder's recipe for CPU `load_inline` extensions (`cpu_extension.py`): compilers only, in a sandbox.

The recipe is PyTorch's own for a CPU extension (torch 2.13's ninja file, spelt out so that no candidate-controlled
text reaches a shell or ninja): main.cpp compiled with torch's include folders as system headers, `-fPIC
-std=c++20` and the spec's allow-listed flags, then linked `-shared` against c10, torch_cpu, torch and torch_python.
It runs in the CUDA builder's bubblewrap view (`builder._bwrap_view`: the toolchain, the Python installation, the
build's own folder; no home, no project, no /tmp), or without bubblewrap in the build jail with the same reads
(`build_jail.py`), behind a self-test per process so that a view missing part of the
toolchain is never cached as the candidate's compile error.

The build cache (`build/cache.py`, mode `cpu`) keys each build by the spec and `toolchain()`: torch's version and
commit, the Python ABI, the compiler and its version, and the recipe itself (a changed default flag is another key).
"""

from __future__ import annotations

import functools
import logging
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any, Sequence

from evaluator.build import builder
from evaluator.build.format import BUILD_FORMAT, tool_version
from evaluator.build.cpu_extension import CpuExtensionSpec
from evaluator.build.cuda import CompileFailed, cxx_path

log = logging.getLogger(__name__)
LIBRARIES = ("-lc10", "-ltorch_cpu", "-ltorch", "-ltorch_python")  # cpp_extension._prepare_ldflags, CPU, a module


# torch 2.13's `cpp_extension.include_paths("cpu")` and `library_paths("cpu")`, found from torch's own folder: importing
# cpp_extension (and setuptools with it) costs 0.4 s, which a cache hit in a fresh driver would otherwise pay. Resolved:
# the sandbox binds the real folders, so a path through a symlink (a virtual environment linked into a checkout, say)
# would not exist inside it.
def _torch_dir() -> Path:
    import torch
    return Path(torch.__file__).resolve().parent


def include_dirs() -> list[str]:
    include = _torch_dir() / "include"
    python = Path(sysconfig.get_path("include", scheme="posix_prefix")).resolve()
    return [str(include), str(include / "torch" / "csrc" / "api" / "include"), str(python)]


def library_dirs() -> list[str]:
    return [str(_torch_dir() / "lib")]


def commands(spec: CpuExtensionSpec, cxx: str) -> list[list[str]]:
    """The compile and link command lines, as torch's ninja recipe for a CPU load_inline extension writes them."""
    compile_line = [cxx, f"-DTORCH_EXTENSION_NAME={spec.name}", "-DTORCH_API_INCLUDE_EXTENSION_H",
                    *(a for d in include_dirs() for a in ("-isystem", d)), "-fPIC", "-std=c++20",
                    *spec.extra_cflags, "-c", "main.cpp", "-o", "main.o"]
    link_line = [cxx, "main.o", "-shared", *spec.extra_ldflags, *(f"-L{d}" for d in library_dirs()), *LIBRARIES,
                 "-o", f"{spec.name}.so"]
    return [compile_line, link_line]


def toolchain() -> dict[str, Any] | None:
    """What else decides the build's outcome; None where there is no C++ compiler."""
    import torch
    cxx = cxx_path()
    if cxx is None:
        return None
    recipe = commands(CpuExtensionSpec("NAME", ("SOURCES",), None), "CXX")
    return {"format": BUILD_FORMAT, "mode": "cpu", "torch": torch.__version__, "torch_git": torch.version.git_version,
            "python": sys.implementation.cache_tag, "cxx": f"{cxx} {tool_version(cxx, False)}", "recipe": recipe}


def build(spec: CpuExtensionSpec, work: Path, timeout_s: float, prefix: Sequence[str]) -> Path:
    """Builds `<name>.so` in `work`. Raises CompileFailed (the compiler's or linker's log), BuildTimeout, or
    BuilderFailed (no compiler)."""
    cxx = cxx_path()
    if cxx is None:
        raise builder.BuilderFailed("no C++ compiler (g++ or c++) was found")
    (work / "main.cpp").write_text(spec.main_cpp())
    env = builder_env(work)
    for line in commands(spec, cxx):  # one after the other: the link needs the object
        failed = builder.run_concurrently([line], work, timeout_s, prefix, env)
        if failed is not None:
            raise CompileFailed(failed[1])
    artifact = work / f"{spec.name}.so"
    if not artifact.is_file():
        raise builder.BuilderFailed(f"the compiler wrote no {artifact.name}")
    return artifact


builder_env = builder.plain_env


def sandbox_prefix(work: Path, isolation: str) -> list[str] | None:
    """The compilers' sandbox, where it can build a torch extension here (`builder.sandboxed_prefix`)."""
    return builder.sandboxed_prefix(work, isolation, _sandbox_works)


@functools.lru_cache(maxsize=2)
def _sandbox_works(kind: str) -> bool:
    """Compiles a file with Python's and c10's headers and links it against torch's libraries inside the view, once
    per process (about a second): a view without them would otherwise fail every candidate's build."""
    cxx = cxx_path()
    if cxx is None:
        return False
    with tempfile.TemporaryDirectory(prefix="opforge-cpu-ext-probe-") as d:
        work = Path(d)
        probe = "#include <Python.h>\n#include <c10/macros/Macros.h>\nint probe() { return 1; }\n"
        (work / "probe.cpp").write_text(probe)
        lines = [[cxx, "-fPIC", "-std=c++20", *(a for i in include_dirs() for a in ("-isystem", i)), "-c", "probe.cpp",
                  "-o", "probe.o"],
                 [cxx, "probe.o", "-shared", *(f"-L{i}" for i in library_dirs()), *LIBRARIES, "-o", "probe.so"]]
        failed = None
        try:
            for line in lines:
                failed = failed or builder.run_concurrently([line], work, 120, builder.view_prefix(kind, work),
                                                            builder_env(work))
        except (builder.BuildTimeout, OSError) as exc:
            failed = (1, str(exc))
    if failed is not None:
        log.warning("the CPU extension builder's sandbox does not work here: %s", failed[1][-1000:])
    return failed is None
