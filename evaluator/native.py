"""Native C/C++ CPU kernels with a plain C ABI, called on tensors' data pointers: `load_c`.

    lib = load_c("gelu", SOURCE, functions=["gelu"], flags=["-O3", "-march=native", "-fopenmp"])
    lib.gelu(x, out, x.numel())   # x, out: contiguous float32 CPU tensors; the count: a Python int

Outside the evaluator `load_c` builds with the system compiler into a per-user cache keyed by the sources, flags,
language and compiler version (`native_build.py`), and loads the library with ctypes. Inside the evaluator's
candidate worker the same call is served by the trusted build stage: the worker never runs a compiler, it receives
the library's bytes from its driver (`serve`). Each call of a bound function is counted as one launch of
`cpp:<function>` once it has returned.

The format (prototypes, flags, dtypes) is described in `native_spec.py` and the README.
"""

from __future__ import annotations

import ctypes
import functools
import numbers
import os
import tempfile
import threading
from pathlib import Path
from typing import Any, Callable

import torch

from evaluator.build.native_build import CompilerMissing, NativeBuildError, NativeCache, cache_root, compiler, entry_key
from evaluator.build.native_spec import TYPES, NativeSpec, Prototype, PrototypeError

__all__ = ["load_c", "CompilerMissing", "NativeBuildError", "PrototypeError"]

# Set by the evaluator's candidate worker only (`serve`): the build stage's answer to a spec (the library's bytes;
# None while the driver only collects the builds), and the worker's launch counters.
_served_build: Callable[[NativeSpec], bytes | None] | None = None
_launches: dict[str, int] | None = None
_loaded: dict[str, "NativeLibrary"] = {}
_loading = threading.Lock()

_INT_RANGES = {ctypes.c_int8: 8, ctypes.c_int16: 16, ctypes.c_int32: 32, ctypes.c_int64: 64}
_UINT_RANGES = {ctypes.c_uint8: 8, ctypes.c_uint16: 16, ctypes.c_uint32: 32, ctypes.c_uint64: 64}


def load_c(name: str, sources: str | list[str], functions: str | list[str], flags: list[str] | tuple[str, ...] = (),
           language: str = "c") -> "NativeLibrary":
    """Builds C (C11) or C++ (C++17, functions `extern "C"`) sources into a shared library and binds `functions`.

    Raises TypeError/ValueError (one sentence) for a bad call, a refused flag or an unreadable prototype, and
    NativeBuildError with the compiler's log when the sources do not compile (CompilerMissing, one sentence, when no
    compiler is installed)."""
    spec = NativeSpec.from_call(name, sources, functions, flags, language)
    prototypes = spec.prototypes()
    with _loading:
        if _served_build is not None:
            data = _served_build(spec)
            if data is None:  # the driver is only collecting the builds: nothing runs in this process
                return NativeLibrary(spec.name, prototypes, None)
            served = Path(tempfile.mkdtemp(prefix="native-")) / f"lib{spec.name}.so"
            served.write_bytes(data)
            return NativeLibrary(spec.name, prototypes, served)
        key = entry_key(spec)
        if key in _loaded:
            return _loaded[key]
        cache = NativeCache(cache_root())
        outcome = cache.get_or_build(spec)
        if outcome.status == "unavailable" and compiler(spec.language) is None:
            raise CompilerMissing(spec.name, spec.language)
        if outcome.status != "built":
            raise NativeBuildError(outcome.log or f"load_c({spec.name!r}): the build {outcome.status}")
        path = cache.library_path(key)
        if path is None:  # the entry was replaced under us: load a private copy of the bytes
            path = Path(tempfile.mkdtemp(prefix="native-")) / f"lib{spec.name}.so"
            path.write_bytes(outcome.library)
        library = _loaded[key] = NativeLibrary(spec.name, prototypes, path)
        return library


def serve(build: Callable[[NativeSpec], bytes | None], launches: dict[str, int]) -> None:
    """The candidate worker's hook (before the candidate is imported): builds come from `build`, launches are
    counted in `launches`."""
    global _served_build, _launches
    _served_build, _launches = build, launches


class NativeLibrary:
    """The bound functions of one built library, as attributes."""

    def __init__(self, name: str, prototypes: tuple[Prototype, ...], path: Path | None, counted: bool = True):
        """`counted`: its calls count as kernel launches (the harness's own libraries' calls do not)."""
        self._name = name
        self._path = path
        self._functions: dict[str, NativeFunction] = {}
        handle = ctypes.CDLL(str(path), mode=os.RTLD_NOW | os.RTLD_LOCAL) if path is not None else None
        if handle is not None:
            _match_openmp_threads(handle)
        for proto in prototypes:
            self._functions[proto.name] = NativeFunction(name, proto, handle, counted)

    def __getattr__(self, attr: str) -> "NativeFunction":
        functions = self.__dict__.get("_functions", {})
        if attr in functions:
            return functions[attr]
        raise AttributeError(f"load_c({self.__dict__.get('_name')!r}) bound no function {attr!r} (bound: "
                             f"{', '.join(functions) or 'none'})")

    def __dir__(self) -> list[str]:
        return sorted(self._functions)

    def __repr__(self) -> str:
        return f"<native library {self._name}: {', '.join(self._functions)}>"


class NativeFunction:
    """One C function: checks each argument against its prototype, then calls it with tensors' data pointers."""

    def __init__(self, library: str, proto: Prototype, handle: ctypes.CDLL | None, counted: bool = True):
        self.__name__ = proto.name
        self._counted = counted
        self._proto = proto
        self._where = f"{library}.{proto.name}()"
        self._label = f"cpp:{proto.name}"
        self._call: Any = None
        if handle is not None:
            try:
                fn = getattr(handle, proto.name)
            except AttributeError:
                raise PrototypeError(f"load_c({library!r}): {proto.name} is not exported by the built library "
                                     "(static, or C++ without extern \"C\"?)") from None
            fn.argtypes = [ctypes.c_void_p if a.pointer else TYPES[a.ctype][0] for a in proto.args]
            fn.restype = None if proto.returns == "void" else TYPES[proto.returns][0]
            self._call = fn

    def __call__(self, *args: Any) -> Any:
        proto = self._proto
        if len(args) != len(proto.args):
            raise TypeError(f"{self._where} takes {len(proto.args)} arguments ({self._signature()}) but was given "
                            f"{len(args)}")
        values = [self._convert(i, a, v) for i, (a, v) in enumerate(zip(proto.args, args), 1)]
        if self._call is None:
            raise RuntimeError(f"{self._where} cannot run: the library was not built in this process")
        result = self._call(*values)
        if _launches is not None and self._counted:  # counted once the call returned: work done, not work started
            _launches[self._label] = _launches.get(self._label, 0) + 1
        return result

    def _convert(self, index: int, arg: Any, value: Any) -> Any:
        # The message is built only for a refused argument: this runs inside every timed call of a candidate.
        if arg.pointer:
            if not isinstance(value, torch.Tensor):
                raise TypeError(f"{self._what(index, arg)} ({arg.ctype}*) must be a torch.Tensor, not "
                                f"{type(value).__name__}")
            if not value.is_cpu:  # (not `value.device.type`: building a device object costs about 1 us a call)
                raise ValueError(f"{self._what(index, arg)} must be a CPU tensor, not one on {value.device}")
            dtypes = TYPES[arg.ctype][1]
            if dtypes and value.dtype not in dtypes:
                raise TypeError(f"{self._what(index, arg)} ({arg.ctype}*) must be a "
                                f"{' or '.join(map(str, dtypes))} tensor, not {value.dtype}")
            if not value.is_contiguous():
                raise ValueError(f"{self._what(index, arg)} must be a contiguous tensor (call .contiguous() first); "
                                 f"its strides are {tuple(value.stride())} for shape {tuple(value.shape)}")
            return value.data_ptr()
        ctype = TYPES[arg.ctype][0]
        if type(value) is int and ctype not in (ctypes.c_float, ctypes.c_double):  # the common case, without ABCs
            low, high = _range_of(ctype)
            if not low <= value <= high:
                raise ValueError(f"{self._what(index, arg)} ({arg.ctype}) is out of range: {value}")
            return value
        if isinstance(value, torch.Tensor) or not isinstance(value, numbers.Real):
            raise TypeError(f"{self._what(index, arg)} ({arg.ctype}) must be a Python number, not "
                            f"{type(value).__name__}")
        if ctype in (ctypes.c_float, ctypes.c_double):
            return float(value)
        if not isinstance(value, numbers.Integral):
            raise TypeError(f"{self._what(index, arg)} ({arg.ctype}) must be an integer, not {value!r}")
        value = int(value)
        low, high = _range_of(ctype)
        if not low <= value <= high:
            raise ValueError(f"{self._what(index, arg)} ({arg.ctype}) is out of range: {value}")
        return value

    def _what(self, index: int, arg: Any) -> str:
        return f"{self._where}: {arg.describe(index)}"

    def _signature(self) -> str:
        return ", ".join(f"{a.ctype}{'*' if a.pointer else ''} {a.name}".strip() for a in self._proto.args)

    def __repr__(self) -> str:
        return f"<native function {self._where[:-2]}({self._signature()})>"


@functools.lru_cache(maxsize=None)
def _range_of(ctype: Any) -> tuple[int, int]:
    """The values an integer C type holds."""
    if ctype is ctypes.c_bool:
        return 0, 1
    bits = _INT_RANGES.get(ctype)
    return (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if bits else (0, 2 ** _UINT_RANGES.get(ctype, 1) - 1)


def _match_openmp_threads(handle: ctypes.CDLL) -> None:
    """An OpenMP library runs with PyTorch's intra-op thread count, so reference and candidate get the same."""
    try:
        set_threads = handle.omp_set_num_threads  # found where the library links an OpenMP runtime
    except AttributeError:
        return
    set_threads.argtypes = [ctypes.c_int]
    set_threads.restype = None
    set_threads(torch.get_num_threads())
