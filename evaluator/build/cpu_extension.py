"""CPU extensions that candidates declare with `torch.utils.cpp_extension.load_inline(cpp_sources=...)`, no CUDA.

Such a call used to build privately inside the candidate's worker with torch's headers: 30-90 s on every evaluation,
with any flag the candidate liked. Now it goes the way CUDA sources and `load_c` go (`build/stage.py`):

- the worker's load_inline hook (`build_redirect.py`) turns the call into a `CpuExtensionSpec` (name, sources, bound
  functions, flags from an allow-list) and asks its driver for the build (`prebuilt`); a call the stage cannot build
  (an unknown argument, a flag outside the allow-list) is a compile error in one sentence, never a private build;
- the driver builds the spec once per digest in the trusted builder's sandbox (`cpu_extension_build.py`) into the
  build cache (`build/cache.py`, mode `cpu`) and sends the worker the extension's bytes, which it loads from its
  private folder; a second evaluation, or another worker, costs a cache lookup and a dlopen.

main.cpp is generated exactly as `load_inline` generates it (`BuildSpec.main_cpp`), so a cached build and a private
one compile the same text. Only a call made after the import (in `__init__` or `forward`, where no driver listens)
still builds privately as before.
"""

from __future__ import annotations

import hashlib
import json
import re
import types
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from evaluator.wire.build_verdict import BuildKind, BuildVerdict
from evaluator.build.cuda import MAX_SPEC_CHARS, BuildSpec, CompileFailed, check_names
from evaluator.build.cuda import _functions, _texts, load_extension

if TYPE_CHECKING:
    from evaluator.wire.commands import Built

KIND = BuildKind.CPU_EXTENSION  # the build request's kind on the wire
BuildClient = Callable[[dict[str, Any], str], tuple["Built", list[Any]]]  # (spec, kind) -> (the answer, blobs)
# Compile flags: optimisation, the CPU's vector extensions, OpenMP, macros, standards and warnings. Nothing that names
# a file or a program (-I, -include, -fplugin, -B, -specs, @file): the builder's view is small, but still.
_CFLAG = re.compile(r"-O[0-3s]?|-Ofast|-march=[a-z0-9-]+|-mtune=[a-z0-9-]+|-fopenmp(-simd)?|-ffast-math|"
                    r"-funroll-loops|-fno-math-errno|-fno-trapping-math|-ffp-contract=(fast|off|on)|-mavx|-mavx2|-mfma|"
                    r"-mavx512[a-z0-9]+|-mf16c|-mbmi2?|-mpopcnt|-msse4(\.[12])?|-mssse3|-fno-strict-aliasing|"
                    r"-ftree-vectorize|-fopt-info-vec|-mprefer-vector-width=(128|256|512)|-fPIC|-pthread|-g|-g0|"
                    r"-std=(c|gnu)\+\+(14|17|20)|-w|"
                    r"-W[a-z][a-z0-9-]*(=[0-9]+)?|"
                    r"-[DU][A-Za-z_][A-Za-z0-9_]{0,99}(=[A-Za-z0-9_.+-]{0,100})?")
_LDFLAG = re.compile(r"-fopenmp|-lgomp|-lm|-lpthread|-pthread")
ALLOWED_CFLAGS = ("-O0..-O3, -Ofast, -Os, -march=<cpu>, -mtune=<cpu>, -fopenmp(-simd), -ffast-math, -funroll-loops, "
                  "-fno-math-errno, -fno-trapping-math, -ffp-contract=..., -mavx, -mavx2, -mfma, -mavx512<part>, "
                  "-mf16c, -mbmi, -mbmi2, -mpopcnt, -msse4*, -fno-strict-aliasing, -ftree-vectorize, -fopt-info-vec, "
                  "-mprefer-vector-width=128|256|512, "
                  "-fPIC, -pthread, -g, -std=c++14|17|20 (or gnu++), -w, -W<warning>, -DNAME[=VALUE], -UNAME")
ALLOWED_LDFLAGS = "-fopenmp, -lgomp, -lm, -lpthread, -pthread"
# load_inline arguments that change nothing the stage builds (where the build happens, how loudly, its own header
# cache), and those that must keep their default.
_PASSIVE = {"verbose", "keep_intermediates", "use_pch", "build_directory"}
_DEFAULTS: dict[str, tuple[Any, ...]] = {"with_cuda": (None, False), "is_python_module": (True,),
                                         "extra_include_paths": (None, [], ()), "extra_cuda_cflags": (None, [], ()),
                                         "extra_sycl_cflags": (None, [], ()), "with_sycl": (None, False),
                                         "no_implicit_headers": (False,)}


class CpuBuildFailed(CompileFailed):
    """A CPU extension the stage did not build: `reason` is one sentence, the message the compiler's log (or the
    reason again)."""

    def __init__(self, reason: str, log_text: str = "") -> None:
        self.reason = reason
        super().__init__(log_text or reason)


def routed(cuda_sources: Any, kwargs: dict[str, Any]) -> bool:
    """Whether a load_inline call is a CPU extension for this stage: no CUDA sources and no request for CUDA's
    libraries (`with_cuda=True` without CUDA sources stays on the CUDA path's private build)."""
    return not cuda_sources and not kwargs.get("with_cuda")


@dataclass(frozen=True, slots=True)
class CpuExtensionSpec:
    """What one CPU `load_inline` call asks to build; `digest` names it in the cache."""

    name: str
    cpp_sources: tuple[str, ...]
    functions: tuple[tuple[str, str], ...] | None
    extra_cflags: tuple[str, ...] = ()
    extra_ldflags: tuple[str, ...] = ()
    error_handling: bool = True

    @classmethod
    def from_call(cls, name: Any, cpp_sources: Any, kwargs: dict[str, Any]) -> "CpuExtensionSpec":
        """The spec of a load_inline call; raises ValueError (one sentence) where the stage cannot build it."""
        unknown = sorted(set(kwargs) - {"functions", "with_pytorch_error_handling", "extra_cflags", "extra_ldflags",
                                        *_PASSIVE, *_DEFAULTS})
        if unknown:
            raise ValueError(f"the argument {unknown[0]} is not supported")
        changed = [k for k in _DEFAULTS if k in kwargs and not _default(kwargs[k], _DEFAULTS[k])]
        if changed:
            raise ValueError(f"the argument {changed[0]}={kwargs[changed[0]]!r} is not supported")
        try:
            # Split at spaces, as load_inline's ninja file does ("-O3 -march=native" is two flags there too).
            spec = cls(str(name), _texts(cpp_sources), _functions(kwargs.get("functions")),
                       tuple(f for item in _texts(kwargs.get("extra_cflags")) for f in item.split()),
                       tuple(f for item in _texts(kwargs.get("extra_ldflags")) for f in item.split()),
                       bool(kwargs.get("with_pytorch_error_handling", True)))
        except TypeError as exc:
            raise ValueError(f"its arguments have the wrong type ({exc})") from None
        spec.validate()
        return spec

    def validate(self) -> None:
        """Raises ValueError (one sentence) unless every field is safe to hand to the trusted builder."""
        check_names(self.name, self.functions)
        for flag in self.extra_cflags:
            if not _CFLAG.fullmatch(flag):
                raise ValueError(f"the compile flag {flag[:60]!r} is not allowed (allowed: {ALLOWED_CFLAGS})")
        for flag in self.extra_ldflags:
            if not _LDFLAG.fullmatch(flag):
                raise ValueError(f"the link flag {flag[:60]!r} is not allowed (allowed: {ALLOWED_LDFLAGS})")
        if not self.cpp_sources or sum(map(len, self.cpp_sources)) > MAX_SPEC_CHARS:
            raise ValueError(f"the sources are empty or longer than {MAX_SPEC_CHARS} characters")

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "cpp_sources": list(self.cpp_sources),
                "functions": None if self.functions is None else [list(p) for p in self.functions],
                "extra_cflags": list(self.extra_cflags), "extra_ldflags": list(self.extra_ldflags),
                "error_handling": self.error_handling}

    @classmethod
    def from_json(cls, data: Any) -> "CpuExtensionSpec":
        """Rebuilds a spec sent by an untrusted worker; raises ValueError for anything malformed."""
        if not isinstance(data, dict):
            raise ValueError("the spec is not an object")
        try:
            functions = data.get("functions")
            spec = cls(str(data["name"]), _texts(data["cpp_sources"]),
                       None if functions is None else tuple((str(a), str(b)) for a, b in functions),
                       _texts(data.get("extra_cflags")), _texts(data.get("extra_ldflags")),
                       data.get("error_handling") is True)
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"the spec is malformed: {exc}") from None
        spec.validate()
        return spec

    @property
    def digest(self) -> str:
        return hashlib.sha256(json.dumps({"kind": KIND, **self.to_json()}, sort_keys=True).encode()).hexdigest()

    def main_cpp(self) -> str:
        """main.cpp as load_inline writes it: torch's header, the sources, the pybind11 block."""
        return BuildSpec(self.name, self.cpp_sources, (), self.functions, error_handling=self.error_handling).main_cpp()


def _default(value: Any, defaults: tuple[Any, ...]) -> bool:
    return any(value is d or (type(value) is type(d) and value == d) for d in defaults)


# -- the candidate worker's side ---------------------------------------------------------------------------------------
def prebuilt(client: BuildClient, collecting: bool, name: Any, cpp_sources: Any,
             kwargs: dict[str, Any]) -> types.ModuleType | types.SimpleNamespace:
    """The load_inline hook's question to its driver for a CPU extension: the loaded extension, a stub while the
    driver only collects builds; raises CompileFailed with the compiler's log or the reason it cannot be built."""
    try:
        spec = CpuExtensionSpec.from_call(name, cpp_sources, kwargs)
    except ValueError as exc:
        raise CpuBuildFailed(f"load_inline({str(name)[:60]!r}) cannot be built by the evaluator: {exc}") from None
    built, blobs = client(spec.to_json(), KIND)
    verdict, log_text = built.verdict, built.log
    if collecting:
        return types.SimpleNamespace()  # the import goes on, so that later calls are recorded too
    if verdict == BuildVerdict.LINKED and blobs:
        return load_extension(spec.name, blobs[0].numpy().tobytes())
    if verdict == BuildVerdict.COMPILE_ERROR:
        raise CpuBuildFailed(f"load_inline({spec.name!r}): the C++ sources do not compile", log_text)
    raise CpuBuildFailed(log_text.splitlines()[0][:300] if log_text else
                         f"load_inline({spec.name!r}) could not be built ({verdict})", log_text)
