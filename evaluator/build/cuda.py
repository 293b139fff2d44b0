"""Building the CUDA extensions that candidates declare with `torch.utils.cpp_extension.load_inline`.

A `load_inline` call becomes a `BuildSpec` (name, sources, bound functions, a small allow-list of flags), which both
sides of the build protocol share:

- the candidate worker's load_inline hook (`build_redirect.py`) records the call and asks its driver for the build
  (`prebuilt`); the driver answers from the build cache (`build/cache.py`, `build/stage.py`). Where no driver answers,
  or the call uses flags outside the allow-list, the worker builds privately as it always did: on a machine without a
  GPU `cuda_fallback.check_compiles` compile-checks the sources (a compile error is still the most useful feedback a
  coder can get) and a clean compile reports "cannot run here"; with a GPU the real `load_inline` builds and loads it;
- the trusted builder (`builder.py`) runs `compile_check` (no GPU: nvcc and the host compiler, objects only) or
  `link` (a real `.so`, through PyTorch's own ninja recipe) on the recorded sources, inside a sandbox of its own.

The sources are generated exactly as `load_inline` generates them (main.cpp with the pybind11 block, cuda.cu with its
implicit headers), so a cached verdict and a private build judge the same text.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sysconfig
import tempfile
import types
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from evaluator.wire.build_verdict import BuildVerdict

if TYPE_CHECKING:
    from evaluator.wire.commands import Built

COMPILE_TIMEOUT_S = 300
LOG_LIMIT_CHARS = 6000
MAX_SPEC_CHARS = 2 * 2**20
DEFAULT_ARCHS = "9.0"  # H100/H200; TORCH_CUDA_ARCH_LIST overrides, on both sides of the cache

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,99}")
_FUNCTION = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(::[A-Za-z_][A-Za-z0-9_]*)*")
_DOC = re.compile(r"[^\"\\\n\r]{0,500}")


def check_names(name: str, functions: tuple[tuple[str, str], ...] | None) -> None:
    """Raises ValueError (one sentence) unless an extension's name and its bound functions and docstrings are valid
    C++ where the generated binding code puts them (the CUDA and the CPU extension specs alike)."""
    if not _NAME.fullmatch(name):
        raise ValueError(f"the extension name {name[:60]!r} is not a C++ identifier")
    for fn, doc in functions or ():
        if not _FUNCTION.fullmatch(fn) or not _DOC.fullmatch(doc):
            raise ValueError(f"the bound function {fn[:60]!r} or its docstring is not valid in C++")
_CFLAG = re.compile(r"-O[0-3s]?|-[DU][A-Za-z_][A-Za-z0-9_]*(=[A-Za-z0-9_.+-]*)?|-?-use_fast_math|-lineinfo|"
                    r"--expt-relaxed-constexpr|--expt-extended-lambda|--extended-lambda|-std=c\+\+(17|20)")
_LDFLAG = re.compile(r"-l(cublas|cublasLt|curand|cufft|cusparse|cusolver|cuda)")
_FLAG_FIELDS = ("extra_cflags", "extra_cuda_cflags", "extra_ldflags")
# load_inline arguments that do not change what is built, and those that must keep their default to be cached.
_PASSIVE = {"verbose", "keep_intermediates", "use_pch"}
_DEFAULTS: dict[str, tuple[Any, ...]] = {"with_cuda": (None, True), "is_python_module": (True,), "extra_include_paths": (None, [], ()),
             "build_directory": (None,), "extra_sycl_cflags": (None, [], ()), "with_sycl": (None, False),
             "no_implicit_headers": (False,)}


class CompileFailed(Exception):
    """The sources do not compile; the message holds the compiler's log."""


class NoCudaDevice(Exception):
    """The sources compiled, but there is no CUDA device here to run them on."""


def _texts(sources: Any) -> tuple[str, ...]:
    if sources is None:
        return ()
    if isinstance(sources, str):
        return (sources,)
    out = tuple(sources)
    if not all(isinstance(s, str) for s in out):
        raise TypeError("sources must be strings")
    return out


def _functions(functions: Any) -> tuple[tuple[str, str], ...] | None:
    if functions is None:
        return None
    if isinstance(functions, str):
        functions = [functions]
    if isinstance(functions, (list, tuple)):
        functions = {f: f for f in functions}
    if not isinstance(functions, dict):
        raise TypeError("functions must be a string, a list or a dict")
    return tuple((str(k), str(v)) for k, v in functions.items())


@dataclass(frozen=True, slots=True)
class BuildSpec:
    """What one `load_inline` call asks to build; `digest` names it in the cache."""

    name: str
    cpp_sources: tuple[str, ...]
    cuda_sources: tuple[str, ...]
    functions: tuple[tuple[str, str], ...] | None
    extra_cflags: tuple[str, ...] = ()
    extra_cuda_cflags: tuple[str, ...] = ()
    extra_ldflags: tuple[str, ...] = ()
    error_handling: bool = True

    @classmethod
    def from_call(cls, name: Any, cpp_sources: Any, cuda_sources: Any, kwargs: dict[str, Any],
                  strict: bool = True) -> "BuildSpec | None":
        """The spec of a load_inline call; None where it cannot be cached (`strict`: unusual arguments or flags).
        Not strict (a private compile check): flags outside the allow-list are dropped instead."""
        try:
            flags = {f: _texts(kwargs.get(f)) for f in _FLAG_FIELDS}
            spec = cls(str(name), _texts(cpp_sources), _texts(cuda_sources), _functions(kwargs.get("functions")),
                       error_handling=bool(kwargs.get("with_pytorch_error_handling", True)), **flags)
        except (TypeError, ValueError):
            return None
        if not strict:
            kept = {k: tuple(f for f in getattr(spec, k) if _allowed(k, f)) for k in _FLAG_FIELDS}
            return cls(spec.name, spec.cpp_sources, spec.cuda_sources, spec.functions, kept["extra_cflags"],
                       kept["extra_cuda_cflags"], kept["extra_ldflags"], error_handling=spec.error_handling)
        known = {"functions", "with_pytorch_error_handling", *_FLAG_FIELDS, *_PASSIVE, *_DEFAULTS}
        if set(kwargs) - known or any(kwargs[k] not in _DEFAULTS[k] for k in _DEFAULTS if k in kwargs):
            return None
        try:
            spec.validate()
        except ValueError:
            return None
        return spec

    def validate(self) -> None:
        """Raises ValueError (one sentence) unless every field is safe to hand to the trusted builder."""
        check_names(self.name, self.functions)
        for field in _FLAG_FIELDS:
            if not all(isinstance(f, str) and _allowed(field, f) for f in getattr(self, field)):
                raise ValueError(f"{field} holds flags outside the allow-list")
        if not self.cuda_sources or sum(map(len, self.cpp_sources + self.cuda_sources)) > MAX_SPEC_CHARS:
            raise ValueError(f"the sources are empty or longer than {MAX_SPEC_CHARS} characters")

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "cpp_sources": list(self.cpp_sources), "cuda_sources": list(self.cuda_sources),
                "functions": None if self.functions is None else [list(p) for p in self.functions],
                "extra_cflags": list(self.extra_cflags), "extra_cuda_cflags": list(self.extra_cuda_cflags),
                "extra_ldflags": list(self.extra_ldflags), "error_handling": self.error_handling}

    @classmethod
    def from_json(cls, data: Any) -> "BuildSpec":
        """Rebuilds a spec sent by an untrusted worker; raises ValueError for anything malformed."""
        if not isinstance(data, dict):
            raise ValueError("spec is not an object")
        try:
            functions = data.get("functions")
            spec = cls(str(data["name"]), _texts(data["cpp_sources"]), _texts(data["cuda_sources"]),
                       None if functions is None else tuple((str(a), str(b)) for a, b in functions),
                       _texts(data.get("extra_cflags")), _texts(data.get("extra_cuda_cflags")),
                       _texts(data.get("extra_ldflags")), error_handling=data.get("error_handling") is True)
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"malformed spec: {exc}") from None
        spec.validate()
        return spec

    @property
    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.to_json(), sort_keys=True).encode()).hexdigest()

    def main_cpp(self) -> str:
        lines = ["#include <torch/extension.h>", *self.cpp_sources]
        if self.functions is not None:
            lines.append("PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {")
            for fn, doc in self.functions:
                bound = f"torch::wrap_pybind_function({fn})" if self.error_handling else fn
                lines.append(f'm.def("{fn}", {bound}, "{doc}");')
            lines.append("}")
        return "\n".join(lines)

    def cuda_cu(self) -> str:
        return "\n".join(["#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>",
                          *self.cuda_sources])


def _allowed(field: str, flag: str) -> bool:
    return bool((_LDFLAG if field == "extra_ldflags" else _CFLAG).fullmatch(flag.strip()))


# -- toolchain ---------------------------------------------------------------------------------------------------------
def default_archs() -> str:
    return os.environ.get("TORCH_CUDA_ARCH_LIST") or DEFAULT_ARCHS


def arch_flags(archs: str) -> list[str]:
    flags = []
    for item in re.split(r"[;,\s]+", archs.strip()):
        num = item.removesuffix("+PTX").replace(".", "")
        if num.isdigit():
            flags.append(f"-gencode=arch=compute_{num},code=sm_{num}")
            if item.endswith("+PTX"):
                flags.append(f"-gencode=arch=compute_{num},code=compute_{num}")
    return flags or ["-arch=sm_90"]


def nvcc_path(mode: str = "check") -> str | None:
    if mode == "link":
        from torch.utils import cpp_extension
        home = cpp_extension.CUDA_HOME
        if home and Path(home, "bin", "nvcc").is_file():
            return str(Path(home, "bin", "nvcc"))
    return shutil.which("nvcc")


def cxx_path() -> str | None:
    return shutil.which(os.environ.get("CXX", "")) or shutil.which("g++") or shutil.which("c++")


def include_flags() -> list[str]:
    from torch.utils import cpp_extension
    dirs = list(cpp_extension.include_paths()) + [sysconfig.get_paths()["include"]]
    return [f"-I{d}" for d in dirs]


# -- the candidate worker's side ------------------------------------------------------------------------------------
BuildClient = Callable[[dict[str, Any]], tuple["Built", list[Any]]]  # spec -> (the driver's answer, blobs)


def prebuilt(client: BuildClient | None, mode: str, collecting: bool, cuda_available: bool, name: Any,
             cpp_sources: Any, cuda_sources: Any, kwargs: dict[str, Any]) -> Any:
    """The load_inline hook's question to its driver. Returns the loaded extension (a GPU and a linked build), a stub
    while collecting, or None (no driver, an uncacheable call, or a build the driver skipped: build privately).
    Raises CompileFailed or NoCudaDevice with the cached verdict.

    `mode` is the driver's: for `link` only plain calls are cached (others build privately with all their flags);
    for `check` flags outside the allow-list are dropped, as the private check always did, so every call goes to the
    sandboxed builder and none compiles inside the worker's wider view."""
    if client is None:
        return None
    spec = BuildSpec.from_call(name, cpp_sources, cuda_sources, kwargs, strict=mode == "link")
    if spec is None:
        return None
    if mode != "link":
        try:
            spec.validate()
        except ValueError as exc:
            raise CompileFailed(f"load_inline cannot build this: {exc}") from None
    built, blobs = client(spec.to_json())
    verdict = built.verdict
    if collecting:
        return types.SimpleNamespace()  # the import goes on, so that later load_inline calls are recorded too
    if verdict == BuildVerdict.REFUSED:
        raise CompileFailed(built.log or "the driver refused to build these sources")
    if verdict == BuildVerdict.COMPILE_ERROR:
        raise CompileFailed(built.log or "the CUDA sources do not compile")
    if verdict == BuildVerdict.COMPILED and not cuda_available:
        raise NoCudaDevice("the CUDA sources compiled with nvcc (build cache), but there is no CUDA device here to "
                           "run them on")
    if verdict == BuildVerdict.LINKED and cuda_available and blobs:
        return load_extension(spec.name, blobs[0].numpy().tobytes())
    return None


def load_extension(name: str, data: bytes) -> types.ModuleType:
    """Loads a built extension from its bytes, written into the worker's private directory (GPU path: verified only
    on CPU machines so far)."""
    import importlib.util
    path = Path(tempfile.mkdtemp(prefix="prebuilt-")) / f"{name}.so"
    path.write_bytes(data)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load the built extension {name}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
